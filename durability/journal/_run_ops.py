"""Runs: reading them, moving them along their lifecycle, a person's decisions, retries."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from durability import _decisions
from durability._runs import bump, load_run, require_active, transition
from durability.canonical import storable_json
from durability.errors import (
    CallNotFound,
    InvalidArgument,
    InvalidTransition,
    NoteRequired,
)
from durability.journal._plan import Plan, read, run_write, write
from durability.journal._validation import (
    mask_storable,
    require_int,
    require_text,
)
from durability.records import (
    DECISIONS,
    DECISIONS_NEEDING_NOTE,
    MAX_RETRY_ATTEMPTS,
    RUN_STATUSES,
    TERMINAL_RUN_STATUSES,
    DecisionOutcome,
    RetryGrant,
    Run,
    RunDetail,
)
from durability.store.base import StoreTx

if TYPE_CHECKING:  # pragma: no cover
    from durability.journal._core import Journal


def get_run(run_id: str) -> Plan[Run]:
    return read(lambda tx: load_run(tx, run_id))


def read_run(run_id: str) -> Plan[RunDetail]:
    def op(tx: StoreTx) -> RunDetail:
        run = load_run(tx, run_id)
        return RunDetail(run, tx.list_calls(run_id), tx.list_decisions(run_id))

    return read(op)


def list_runs(
    status: str | Iterable[str] | None, context_id: str | None, limit: int
) -> Plan[list[Run]]:
    statuses = [status] if isinstance(status, str) else (list(status) if status else None)
    for s in statuses or []:
        if s not in RUN_STATUSES:
            raise InvalidArgument(f"unknown run status: {str(s)[:30]}", field="status")
    require_int("limit", limit, minimum=1)
    return read(lambda tx: tx.list_runs(statuses, context_id, limit))


def active_run(context_id: str) -> Plan[Run | None]:
    return read(lambda tx: tx.open_run_for_context(context_id))


def mark_needs_attention(journal: Journal, run_id: str, reason: str, detail: Any) -> Plan[Run]:
    require_text("reason", reason, max_length=64)
    masked = mask_storable(journal.masker, detail)
    now = journal.clock()
    return run_write(
        lambda tx: transition(tx, load_run(tx, run_id), "needs_attention", now, reason, masked),
        run_id=run_id,
    )


def set_run_status(journal: Journal, run_id: str, status: str, reason: str | None) -> Plan[Run]:
    if status not in RUN_STATUSES:
        raise InvalidArgument(f"unknown run status: {str(status)[:30]}", field="status")
    if reason is not None:
        require_text("reason", reason, max_length=64)
    now = journal.clock()
    return run_write(
        lambda tx: transition(tx, load_run(tx, run_id), status, now, reason), run_id=run_id
    )


def note_recovery_attempt(journal: Journal, run_id: str) -> Plan[Run]:
    now = journal.clock()

    def op(tx: StoreTx) -> Run:
        run = load_run(tx, run_id)
        require_active(run)
        return bump(tx, run, now, recovery_attempts=run.recovery_attempts + 1)

    return run_write(op, run_id=run_id)


def contexts_with_runs(context_ids: Iterable[str]) -> Plan[set[str]]:
    ids = [c for c in context_ids if isinstance(c, str)]
    return read(lambda tx: tx.contexts_with_runs(ids) if ids else set())


def delete_run(run_id: str) -> Plan[None]:
    def op(tx: StoreTx) -> None:
        run = load_run(tx, run_id)
        if run.status not in TERMINAL_RUN_STATUSES:
            raise InvalidTransition(
                "only finished runs can be deleted", run_id=run_id, status=run.status
            )
        tx.delete_run(run_id)

    return write(op)


def decide(
    journal: Journal,
    run_id: str,
    decision: str,
    version: int,
    actor: str,
    note: str | None,
    call_id: str | None,
) -> Plan[DecisionOutcome]:
    if decision not in DECISIONS:
        raise InvalidArgument(f"decision must be one of {', '.join(DECISIONS)}", field="decision")
    require_int("version", version, minimum=1)
    require_text("actor", actor)
    if note is not None and not isinstance(note, str):
        raise InvalidArgument("note must be a string", field="note")
    if decision in DECISIONS_NEEDING_NOTE and not (note or "").strip():
        raise NoteRequired(f"{decision} needs a note saying what was checked", decision=decision)
    masked_note = journal.masker.mask_text(note) if note else None
    if masked_note is not None:
        storable_json(masked_note)
    now = journal.clock()
    return write(
        lambda tx: _decisions.apply_decision(
            tx, run_id, decision, version, actor, masked_note, call_id, now
        )
    )


def list_decisions(run_id: str) -> Plan[list[Any]]:
    return read(lambda tx: tx.list_decisions(run_id))


def grant_retries(journal: Journal, run_id: str, attempts: int, actor: str) -> Plan[RetryGrant]:
    require_int("attempts", attempts, minimum=1)
    if attempts > MAX_RETRY_ATTEMPTS:
        raise InvalidArgument(f"attempts must be at most {MAX_RETRY_ATTEMPTS}", field="attempts")
    require_text("actor", actor)
    now = journal.clock()

    def op(tx: StoreTx) -> RetryGrant:
        load_run(tx, run_id)
        grant_id = tx.insert_grant(run_id, attempts, actor, now)
        return next(g for g in tx.list_grants(run_id) if g.id == grant_id)

    return write(op)


def consume_retry(journal: Journal, run_id: str, call_id: str | None) -> Plan[bool]:
    now = journal.clock()

    def op(tx: StoreTx) -> bool:
        run = load_run(tx, run_id)
        call = None
        if call_id is not None:
            call = tx.get_call(call_id)
            if call is None or call.run_id != run_id:
                raise CallNotFound("no such call in this run", run_id=run_id, call_id=call_id)
            if call.state != "failed":
                raise InvalidTransition(
                    "only a failed call can be retried", call_id=call_id, state=call.state
                )
        if not tx.consume_grant(run_id):
            return False
        if call is not None:
            tx.update_call(dataclasses.replace(call, state="superseded", closed_at=now))
            bump(tx, run, now)
        return True

    return run_write(op, run_id=run_id)


def list_retry_grants(run_id: str) -> Plan[list[RetryGrant]]:
    return read(lambda tx: tx.list_grants(run_id))
