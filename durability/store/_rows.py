"""What both engines share about rows: each table's columns, and rows <-> records by name.

A table's ``Columns`` gives the SELECT list and maps a fetched row (in that order) to a
dict by column name, so the SQL text and the mapping come from one tuple of names and a
record is built from named columns, never from positions.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from durability.canonical import canonical_json
from durability.integrity import Undecodable, load_json
from durability.records import Call, Conflict, Decision, Event, RetryGrant, Run
from durability.store.base import CheckpointRow, DocumentRow, InputRow, TaskRow

#: Results whose JSON is larger than this are spilled into the blobs table.
RESULT_SPILL_BYTES = 256 * 1024

Named = dict[str, Any]


class Columns:
    """A table's columns, in the order its SELECT lists them."""

    __slots__ = ("_ordered", "names", "select")

    def __init__(self, *names: str) -> None:
        self.names = names
        self.select = ", ".join(names)
        self._ordered = operator.itemgetter(*names)

    def qualified(self, table: str) -> str:
        """The SELECT list with each column prefixed by ``table.``."""
        return ", ".join(f"{table}.{name}" for name in self.names)

    def named(self, row: Sequence[Any]) -> Named:
        """A fetched row (these columns first, in order) as a dict by column name."""
        return dict(zip(self.names, row, strict=False))

    def ordered(self, values: Named) -> tuple[Any, ...]:
        """Values by column name as a tuple in these columns' order (for ``?`` / ``%s``
        placeholders, which bind faster than named ones)."""
        return self._ordered(values)  # type: ignore[no-any-return]


INPUTS = Columns("input_id", "digest", "context_id", "run_id", "kind", "created_at")
RUNS = Columns(
    "id",
    "context_id",
    "input_id",
    "input_digest",
    "status",
    "version",
    "reason",
    "reason_detail",
    "recovery_attempts",
    "created_at",
    "updated_at",
)
CALLS = Columns(
    "id",
    "run_id",
    "agent_no",
    "seq",
    "attempt",
    "kind",
    "name",
    "args",
    "policy",
    "fingerprint",
    "state",
    "result",
    "result_blob",
    "result_digest",
    "created_at",
    "closed_at",
)
CHECKPOINTS = Columns("id", "run_id", "context_id", "seq", "body", "digest", "created_at")
DOCUMENTS = Columns("context_id", "kind", "revision", "body", "digest", "updated_at", "updated_by")
CONFLICTS = Columns(
    "id",
    "context_id",
    "kind",
    "expected_revision",
    "actual_revision",
    "proposed",
    "actor",
    "created_at",
    "resolved_at",
    "resolution",
    "resolved_by",
)
DECISIONS = Columns("id", "run_id", "call_id", "decision", "version", "actor", "note", "created_at")
GRANTS = Columns("id", "run_id", "attempts", "remaining", "actor", "created_at")
TASKS = Columns(
    "id",
    "revision",
    "body",
    "digest",
    "created_at",
    "created_by",
    "updated_at",
    "updated_by",
    "done_until",
    "last_slot",
    "last_input_id",
    "last_run_id",
    "last_fired_at",
    "last_skip",
)
EVENTS = Columns("id", "context_id", "run_id", "type", "payload", "created_at", "digest")


def dump(value: Any) -> str:
    return canonical_json(value)


def load(text: str | bytes | None) -> Any:
    return load_json(text)  # damage comes back as an Undecodable marker, never an error


# rows -> records
def input_row(r: Named) -> InputRow:
    return InputRow(
        input_id=r["input_id"],
        digest=r["digest"],
        context_id=r["context_id"],
        run_id=r["run_id"],
        kind=r["kind"],
        created_at=r["created_at"],
    )


def run_record(r: Named) -> Run:
    return Run(
        id=r["id"],
        context_id=r["context_id"],
        input_id=r["input_id"],
        input_digest=r["input_digest"],
        status=r["status"],
        version=r["version"],
        reason=r["reason"],
        reason_detail=load(r["reason_detail"]),
        recovery_attempts=r["recovery_attempts"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


def call_record(r: Named, result: Any) -> Call:
    """A call from its row; ``result`` decoded by the caller (it may live in a blob)."""
    return Call(
        id=r["id"],
        run_id=r["run_id"],
        agent_no=r["agent_no"],
        seq=r["seq"],
        attempt=r["attempt"],
        kind=r["kind"],
        name=r["name"],
        args=load(r["args"]),
        policy=r["policy"],
        fingerprint=r["fingerprint"],
        state=r["state"],
        result=result,
        result_digest=r["result_digest"],
        created_at=r["created_at"],
        closed_at=r["closed_at"],
    )


def spilled_result(r: Named, blob: bytes | None) -> Any:
    """The result of a call row whose result lives in the blob ``r["result_blob"]``."""
    if blob is None:
        return Undecodable("the result's blob is missing", "blob_missing")
    return load_json(blob)


def checkpoint_row(r: Named) -> CheckpointRow:
    return CheckpointRow(
        id=r["id"],
        run_id=r["run_id"],
        context_id=r["context_id"],
        seq=r["seq"],
        body=r["body"],
        digest=r["digest"],
        created_at=r["created_at"],
    )


def document_row(r: Named) -> DocumentRow:
    return DocumentRow(
        context_id=r["context_id"],
        kind=r["kind"],
        revision=r["revision"],
        body=r["body"],
        digest=r["digest"],
        updated_at=r["updated_at"],
        updated_by=r["updated_by"],
    )


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


def task_row(r: Named) -> TaskRow:
    return TaskRow(
        id=str(r["id"]),
        revision=int(r["revision"]),
        body=str(r["body"]),
        digest=str(r["digest"]),
        created_at=float(r["created_at"]),
        created_by=str(r["created_by"]),
        updated_at=float(r["updated_at"]),
        updated_by=str(r["updated_by"]),
        done_until=float(r["done_until"]),
        last_slot=_seconds(r["last_slot"]),
        last_input_id=r["last_input_id"],
        last_run_id=r["last_run_id"],
        last_fired_at=_seconds(r["last_fired_at"]),
        last_skip=r["last_skip"],
    )


def task_values(row: TaskRow) -> Named:
    return dataclasses.asdict(row)


def conflict_record(r: Named) -> Conflict:
    return Conflict(
        id=r["id"],
        context_id=r["context_id"],
        kind=r["kind"],
        expected_revision=r["expected_revision"],
        actual_revision=r["actual_revision"],
        proposed=load(r["proposed"]),
        actor=r["actor"],
        created_at=r["created_at"],
        resolved_at=r["resolved_at"],
        resolution=r["resolution"],
        resolved_by=r["resolved_by"],
    )


def decision_record(r: Named) -> Decision:
    return Decision(
        id=r["id"],
        run_id=r["run_id"],
        call_id=r["call_id"],
        decision=r["decision"],
        version=r["version"],
        actor=r["actor"],
        note=r["note"],
        created_at=r["created_at"],
    )


def grant_record(r: Named) -> RetryGrant:
    return RetryGrant(
        id=r["id"],
        run_id=r["run_id"],
        attempts=r["attempts"],
        remaining=r["remaining"],
        actor=r["actor"],
        created_at=r["created_at"],
    )


def event_record(r: Named) -> Event:
    return Event(
        id=r["id"],
        context_id=r["context_id"],
        run_id=r["run_id"],
        type=r["type"],
        payload=load(r["payload"]),
        created_at=r["created_at"],
        digest=r["digest"],
    )


# records -> rows
def run_values(run: Run) -> Named:
    return {
        "id": run.id,
        "context_id": run.context_id,
        "input_id": run.input_id,
        "input_digest": run.input_digest,
        "status": run.status,
        "version": run.version,
        "reason": run.reason,
        "reason_detail": None if run.reason_detail is None else dump(run.reason_detail),
        "recovery_attempts": run.recovery_attempts,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
    }


def call_values(
    call: Call, args_json: str | None, result: str | None, result_blob: str | None
) -> Named:
    return {
        "id": call.id,
        "run_id": call.run_id,
        "agent_no": call.agent_no,
        "seq": call.seq,
        "attempt": call.attempt,
        "kind": call.kind,
        "name": call.name,
        "args": dump(call.args) if args_json is None else args_json,
        "policy": call.policy,
        "fingerprint": call.fingerprint,
        "state": call.state,
        "result": result,
        "result_blob": result_blob,
        "result_digest": call.result_digest,
        "created_at": call.created_at,
        "closed_at": call.closed_at,
    }


def result_is_large(result_json: str) -> bool:
    """True when a result's JSON must be spilled into a blob (cheap for short text)."""
    return len(result_json) * 4 > RESULT_SPILL_BYTES and (
        len(result_json.encode("utf-8")) > RESULT_SPILL_BYTES
    )


def seq_filter(from_seq: Mapping[int, int], mark: str) -> tuple[str, list[Any]]:
    """`` AND (...)``: calls at or past their agent's sequence number in ``from_seq``, and
    every call of an agent it does not name (with the engine's parameter marker)."""
    if not from_seq:
        return "", []
    agents = sorted(from_seq)
    named = ", ".join(mark for _ in agents)
    past = " OR ".join(f"(agent_no = {mark} AND seq >= {mark})" for _ in agents)
    args: list[Any] = list(agents)
    for agent in agents:
        args.extend((agent, from_seq[agent]))
    return f" AND (agent_no NOT IN ({named}) OR {past})", args
