"""Runs: reading them, moving them along their lifecycle, a person's decisions, retries."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from durability import _decisions
from durability._runs import bump, load_run, require_active, transition
from durability.canonical import storable_json
from durability.decision_fit import RETRY_MODEL_CALL
from durability.errors import (
    CallNotFound,
    InvalidArgument,
    InvalidTransition,
    NoteRequired,
)
from durability.journal import _grants
from durability.journal._operation import JournalBase, operation
from durability.journal._plan import Plan, read, run_write, write
from durability.journal._validation import (
    event_payload,
    mask_storable,
    require_int,
    require_text,
)
from durability.records import (
    DECISIONS,
    DECISIONS_NEEDING_NOTE,
    OPEN_RUN_STATUSES,
    RUN_STATUSES,
    TERMINAL_RUN_STATUSES,
    Decision,
    DecisionOutcome,
    DecisionRequest,
    RetryGrant,
    Run,
    RunDetail,
)
from durability.status import CallState, RunStatus
from durability.store.base import StoreTx


class RunOps:
    """Runs: reading them and moving them along their lifecycle."""

    @operation()
    def get_run(journal: JournalBase, run_id: str) -> Plan[Run]:
        return read(lambda tx: load_run(tx, run_id))

    @operation()
    def read_run(journal: JournalBase, run_id: str) -> Plan[RunDetail]:
        """A run with all its calls and decisions, from one snapshot."""

        def op(tx: StoreTx) -> RunDetail:
            run = load_run(tx, run_id)
            return RunDetail(run, tx.calls.list(run_id), tx.decisions.list(run_id))

        return read(op)

    @operation()
    def list_runs(
        journal: JournalBase,
        status: str | Iterable[str] | None = None,
        *,
        context_id: str | None = None,
        limit: int = 100,
    ) -> Plan[list[Run]]:
        """Runs, newest first, optionally filtered by status(es) and chat."""
        return _list_runs(status, context_id, limit)

    @operation()
    def list_nonterminal_runs(journal: JournalBase, limit: int = 100_000) -> Plan[list[Run]]:
        """Active and held runs: what a recovery scan looks at."""
        return _list_runs(OPEN_RUN_STATUSES, None, limit)

    @operation()
    def active_run(journal: JournalBase, context_id: str) -> Plan[Run | None]:
        """The chat's open run (active or held), if any."""
        return read(lambda tx: tx.runs.open_for_context(context_id))

    @operation(prepare="detail")
    def mark_needs_attention(
        journal: JournalBase, run_id: str, reason: str, detail: Any = None
    ) -> Plan[Run]:
        """Hold a run for a person (no-op when it is already held)."""
        require_text("reason", reason, max_length=64)
        masked = mask_storable(journal.masker, detail)
        now = journal.clock()
        return run_write(
            lambda tx: transition(
                tx, load_run(tx, run_id), RunStatus.NEEDS_ATTENTION, now, reason, masked
            ),
            run_id=run_id,
        )

    @operation()
    def set_run_status(
        journal: JournalBase, run_id: str, status: str, *, reason: str | None = None
    ) -> Plan[Run]:
        """Move a run along its lifecycle (a held run leaves only by decision or ending)."""
        if status not in RUN_STATUSES:
            raise InvalidArgument(f"unknown run status: {str(status)[:30]}", field="status")
        if reason is not None:
            require_text("reason", reason, max_length=64)
        now = journal.clock()
        return run_write(
            lambda tx: transition(tx, load_run(tx, run_id), status, now, reason), run_id=run_id
        )

    @operation(prepare="payload")
    def finish_run(
        journal: JournalBase,
        run_id: str,
        status: str,
        *,
        context_id: str,
        event_type: str,
        payload: Any = None,
    ) -> Plan[Run]:
        """End a run and append its closing event (``run_result``) in one transaction: one
        durable commit where ``append_event`` then ``set_run_status`` took two. Refused as
        ``set_run_status`` refuses (``OpenIntents``, ``InvalidTransition``), and then neither
        is written; a run already in ``status`` gets the event alone."""
        if status not in TERMINAL_RUN_STATUSES:
            raise InvalidArgument(f"not a final run status: {str(status)[:30]}", field="status")
        masked, payload_digest = event_payload(
            journal.masker, context_id, "event_type", event_type, payload
        )
        now = journal.clock()

        def op(tx: StoreTx) -> Run:
            run = transition(tx, load_run(tx, run_id), status, now)
            tx.events.insert(context_id, run_id, event_type, masked, now, payload_digest)
            return run

        return run_write(op, run_id=run_id)

    @operation()
    def note_recovery_attempt(journal: JournalBase, run_id: str) -> Plan[Run]:
        """Count one recovery attempt on an active run (to park runs that keep crashing)."""
        now = journal.clock()

        def op(tx: StoreTx) -> Run:
            run = load_run(tx, run_id)
            require_active(run)
            return bump(tx, run, now, recovery_attempts=run.recovery_attempts + 1)

        return run_write(op, run_id=run_id)

    @operation()
    def contexts_with_runs(journal: JournalBase, context_ids: Iterable[str]) -> Plan[set[str]]:
        """Which of these chats still have a run (retention removes a chat's finished runs:
        a chat with none left is gone)."""
        ids = [c for c in context_ids if isinstance(c, str)]
        return read(lambda tx: tx.runs.contexts_with_runs(ids) if ids else set())

    @operation()
    def delete_run(journal: JournalBase, run_id: str) -> Plan[None]:
        """Remove a finished run with its calls, checkpoints, decisions, events and input
        ids."""

        def op(tx: StoreTx) -> None:
            run = load_run(tx, run_id)
            if run.status not in TERMINAL_RUN_STATUSES:
                raise InvalidTransition(
                    "only finished runs can be deleted", run_id=run_id, status=run.status
                )
            tx.runs.delete(run_id)

        return write(op)


class DecisionOps:
    """A person's decisions on a held run, and the retries they grant."""

    @operation()
    def decide(journal: JournalBase, request: DecisionRequest) -> Plan[DecisionOutcome]:
        """Apply a person's decision made on a version of a run (see docs/durability.md);
        ``retry_model_call`` grants retries and runs the held model call again (_grants.py)."""
        decision, note = request.decision, request.note
        retry = decision == RETRY_MODEL_CALL
        if not retry and decision not in DECISIONS:
            choices = ", ".join((*DECISIONS, RETRY_MODEL_CALL))
            raise InvalidArgument(f"decision must be one of {choices}", field="decision")
        if retry:
            _grants.require_attempts(request.attempts, 1)
        require_int("version", request.version, minimum=1)
        require_text("actor", request.actor)
        if note is not None and not isinstance(note, str):
            raise InvalidArgument("note must be a string", field="note")
        if decision in DECISIONS_NEEDING_NOTE and not (note or "").strip():
            raise NoteRequired(
                f"{decision} needs a note saying what was checked", decision=decision
            )
        masked = dataclasses.replace(request, note=journal.masker.mask_text(note) if note else None)
        if masked.note is not None:
            storable_json(masked.note)
        now = journal.clock()
        if retry:
            return _grants.retry_model_call(masked, now)
        return write(lambda tx: _decisions.apply_decision(tx, masked, now))

    @operation()
    def list_decisions(journal: JournalBase, run_id: str) -> Plan[list[Decision]]:
        return read(lambda tx: tx.decisions.list(run_id))

    @operation()
    def grant_retries(
        journal: JournalBase, run_id: str, attempts: int, *, actor: str
    ) -> Plan[RetryGrant]:
        """Allow ``attempts`` more retries of failed calls in this run."""
        _grants.require_attempts(attempts, 1)
        require_text("actor", actor)
        now = journal.clock()

        def op(tx: StoreTx) -> RetryGrant:
            load_run(tx, run_id)
            grant_id = tx.grants.insert(run_id, attempts, actor, now)
            return next(g for g in tx.grants.list(run_id) if g.id == grant_id)

        return write(op)

    @operation()
    def consume_retry(
        journal: JournalBase,
        run_id: str,
        *,
        call_id: str | None = None,
        scopes: Sequence[tuple[str, str]] = (),
    ) -> Plan[bool]:
        """Use one granted retry; False when none is left. With ``call_id`` (a failed call),
        that call is superseded so the next intent at its position is attempt + 1. When the
        run has no grant of its own, a standing grant of one of ``scopes`` pays (its use is
        recorded; durability/journal/_grants.py)."""
        now = journal.clock()

        def op(tx: StoreTx) -> bool:
            run = load_run(tx, run_id)
            call = None
            if call_id is not None:
                call = tx.calls.get(call_id)
                if call is None or call.run_id != run_id:
                    raise CallNotFound("no such call in this run", run_id=run_id, call_id=call_id)
                if call.state != CallState.FAILED:
                    raise InvalidTransition(
                        "only a failed call can be retried", call_id=call_id, state=call.state
                    )
            if not tx.grants.consume(run_id) and (
                call is None or not _grants.use_standing(tx, run_id, call, list(scopes), now)
            ):
                return False
            if call is not None:
                tx.calls.update(
                    dataclasses.replace(call, state=CallState.SUPERSEDED, closed_at=now)
                )
                bump(tx, run, now)
            return True

        return run_write(op, run_id=run_id)

    @operation()
    def list_retry_grants(journal: JournalBase, run_id: str) -> Plan[list[RetryGrant]]:
        return read(lambda tx: tx.grants.list(run_id))


def _list_runs(
    status: str | Iterable[str] | None, context_id: str | None, limit: int
) -> Plan[list[Run]]:
    statuses = [status] if isinstance(status, str) else (list(status) if status else None)
    for s in statuses or []:
        if s not in RUN_STATUSES:
            raise InvalidArgument(f"unknown run status: {str(s)[:30]}", field="status")
    require_int("limit", limit, minimum=1)
    return read(lambda tx: tx.runs.list(statuses, context_id, limit))
