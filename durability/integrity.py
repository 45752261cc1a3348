"""Damaged records: the checks every stored value passes before it is used.

Each value the journal stores carries a digest written in the same transaction: a call's
arguments are covered by its fingerprint, its result by ``result_digest``, an event's payload
by its ``digest``, a document's value by its ``digest`` (checkpoints and history blobs are
checked in durability/checkpoints.py). A backend decodes stored JSON with :func:`load_json`,
which never raises: a value that cannot be decoded comes back as an :class:`Undecodable`
marker, so one damaged row cannot make a listing (or the server's start-up) fail. The checks
here are backend-independent: every engine gets them by returning its rows as records.

A damaged value is never used. The loop and recovery hold the run with reason
``corrupt_record`` (detail: :meth:`Damage.to_dict`); nothing is repaired.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from durability.canonical import Undecodable, digest, fingerprint, load_json
from durability.errors import CorruptCheckpoint, CorruptRecord, NotSerializable
from durability.records import RESULT_STATES, Call, Event, fields_of
from durability.status import CallState
from durability.store.base import StoreTx
from durability.store.rows import DocumentRow


@dataclass(frozen=True)
class Damage:
    """One damaged record: what it is, why it failed, and the ids that find it."""

    record: str  # call_args | call_result | event | document
    reason: str  # digest_mismatch | undecodable | blob_missing | digest_missing
    ids: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"record": self.record, "reason": self.reason, **self.ids}

    def describe(self) -> str:
        """One line for people, e.g. ``call_result of call c1 (run r1, agent 0, seq 3)``."""
        ids = self.ids
        if self.record.startswith("call_"):
            where = (
                f"call {ids.get('call_id')} ({ids.get('name')}; run {ids.get('run_id')},"
                f" agent {ids.get('agent_no')}, seq {ids.get('seq')}, attempt {ids.get('attempt')})"
            )
        elif self.record == "event":
            where = (
                f"event {ids.get('event_id')} ({ids.get('event_type')}; run {ids.get('run_id')})"
            )
        elif self.record == "checkpoint":
            where = f"checkpoint {ids.get('checkpoint_id')} (run {ids.get('run_id')})"
        elif self.record == "task":
            where = f"scheduled task {ids.get('task_id')} (revision {ids.get('revision')})"
        else:
            where = f"document {ids.get('kind')} of chat {ids.get('context_id')}"
            where += f" (revision {ids.get('revision')})"
        return f"{self.record} of {where}: {self.reason}"

    def error(self) -> CorruptRecord:
        return CorruptRecord(f"a stored record is damaged: {self.describe()}", **self.to_dict())


def _value_reason(value: Any, recorded: str | None, compute: Any) -> str | None:
    if isinstance(value, Undecodable):
        return value.reason
    if recorded is None:
        return "digest_missing"
    try:
        return None if compute(value) == recorded else "digest_mismatch"
    except NotSerializable:  # e.g. NaN decoded from tampered text
        return "undecodable"


def _call_ids(call: Call) -> dict[str, Any]:
    return fields_of(
        call, "run_id", "call_id=id", "agent_no", "seq", "attempt", "kind", "name", "state"
    )


def args_damage(call: Call) -> Damage | None:
    """The call's stored arguments against its fingerprint."""
    reason = _value_reason(
        call.args, call.fingerprint, lambda a: fingerprint(call.kind, call.name, a, call.policy)
    )
    return Damage("call_args", reason, _call_ids(call)) if reason else None


def result_damage(call: Call) -> Damage | None:
    """A committed call's stored result against its digest (None when it has no result)."""
    if call.state not in RESULT_STATES and call.result_digest is None:
        return None
    reason = _value_reason(call.result, call.result_digest, digest)
    return Damage("call_result", reason, _call_ids(call)) if reason else None


def call_damages(call: Call) -> list[Damage]:
    """Every damaged part of a call: its arguments (against the fingerprint) and its result."""
    return [d for d in (args_damage(call), result_damage(call)) if d is not None]


def used_damage(call: Call) -> Damage | None:
    """Damage in the part of a call that a resume uses: a committed result is reused; an open
    call's arguments go to receipt adapters and name its receipts. (A committed call's
    arguments are not used: the loop's own arguments are checked against the fingerprint.)"""
    if call.state == CallState.OPEN:
        return args_damage(call)
    if call.state in RESULT_STATES:
        return result_damage(call)
    return None


def event_damage(event: Event) -> Damage | None:
    reason = _value_reason(event.payload, event.digest, digest)
    if reason is None:
        return None
    ids = {
        "event_id": event.id,
        "event_type": event.type,
        "context_id": event.context_id,
        "run_id": event.run_id,
    }
    return Damage("event", reason, ids)


def document_damage(
    context_id: str, kind: str, revision: int, value: Any, recorded: str | None
) -> Damage | None:
    reason = _value_reason(value, recorded, digest)
    if reason is None:
        return None
    ids = {"context_id": context_id, "kind": kind, "revision": revision}
    return Damage("document", reason, ids)


def document_row_damage(row: DocumentRow) -> Damage | None:
    """Damage of a stored document row: its value against its digest."""
    value = load_json(row.body)
    return document_damage(row.context_id, row.kind, row.revision, value, row.digest)


def require_event(event: Event) -> Event:
    damage = event_damage(event)
    if damage is not None:
        raise damage.error()
    return event


def run_call_damages(calls: list[Call]) -> Iterator[Damage]:
    """Damage in what a resume of the run would use of its calls (oldest first)."""
    for call in calls:
        damage = used_damage(call)
        if damage is not None:
            yield damage


@dataclass
class RecordsReport:
    """What :func:`verify_records` checked (counts per record kind) and what it found."""

    checked: dict[str, int] = field(default_factory=dict)
    damages: list[Damage] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.damages


def verify_records(
    tx: StoreTx, *, checkpoints: bool = True, events: bool = True, tasks: bool = True
) -> RecordsReport:
    """Check every call (arguments and result), event, document and scheduled task, and
    each run's latest checkpoint, through the storage interface (any backend). ``python -m
    durability verify`` checks a SQLite file's checkpoints and blobs itself (all of them),
    hence the switches."""
    from durability import checkpoints as cp  # its own validation, history chains included

    report = RecordsReport({"calls": 0, "documents": 0})
    if checkpoints:
        report.checked["checkpoints"] = 0
    for run in tx.runs.list(None, None, 1_000_000_000):
        for call in tx.calls.list(run.id):
            report.checked["calls"] += 1
            report.damages.extend(call_damages(call))
        row = tx.checkpoints.latest(run_id=run.id) if checkpoints else None
        if row is not None:
            report.checked["checkpoints"] += 1
            try:
                cp.load_checkpoint(tx, row)
            except CorruptCheckpoint as exc:
                ids = {"checkpoint_id": row.id, "run_id": row.run_id}
                report.damages.append(Damage("checkpoint", str(exc.fields["reason"]), ids))
    if events:
        report.checked["events"] = _verify_events(tx, report.damages)
    for doc in tx.documents.list():
        report.checked["documents"] += 1
        damage = document_row_damage(doc)
        if damage is not None:
            report.damages.append(damage)
    if tasks:
        _verify_tasks(tx, report)
    return report


def task_definition(body: str, body_digest: str) -> tuple[Any, str | None]:
    """A stored task definition and its damage (None when intact): undecodable (the value
    is None), digest_mismatch or not_an_object (durability/schedules.py reads tasks so)."""
    value = load_json(body)
    if isinstance(value, Undecodable):
        return None, "undecodable"
    if digest(value) != body_digest:
        return value, "digest_mismatch"
    if not isinstance(value, dict):
        return value, "not_an_object"
    return value, None


def _verify_tasks(tx: StoreTx, report: RecordsReport) -> None:
    rows = tx.tasks.list()
    report.checked["tasks"] = len(rows)
    for row in rows:
        _, damage = task_definition(row.body, row.digest)
        if damage is not None:
            ids = {"task_id": row.id, "revision": row.revision}
            report.damages.append(Damage("task", damage, ids))


def _verify_events(tx: StoreTx, damages: list[Damage]) -> int:
    checked, after = 0, 0
    while True:
        events = tx.events.list(None, None, after, 1000)
        for event in events:
            checked += 1
            damage = event_damage(event)
            if damage is not None:
                damages.append(damage)
        if len(events) < 1000:
            return checked
        after = events[-1].id
