"""What each of the five decisions does to a held run and its uncertain call.

On a run held for ``corrupt_record`` the decided call is the damaged one (even when its
result was committed): ``resume`` sets the damaged result aside (abandoned, never read),
``new_attempt`` / ``confirmed_not_completed`` run it again, ``confirmed_completed`` puts the
person's note in its place. ``on_version`` and ``record`` are every decision's first and last
step, ``retry_model_call``'s too (durability/journal/_grants.py).
"""

from __future__ import annotations

import dataclasses

from durability import decision_fit
from durability._runs import bump, load_run, stale
from durability.canonical import digest
from durability.errors import (
    CallNotFound,
    DecisionNotApplicable,
    InvalidTransition,
    NoOpenCall,
    RunNotHeld,
)
from durability.records import (
    OPEN_RUN_STATUSES,
    RESULT_STATES,
    Call,
    DecisionOutcome,
    DecisionRequest,
    Run,
)
from durability.status import CallState, DecisionKind, RunStatus
from durability.store.base import StoreTx


def _target_call(tx: StoreTx, run: Run, call_id: str | None) -> Call | None:
    damaged = decision_fit.damaged_call_id(run)
    if call_id is not None:
        call = tx.calls.get(call_id)
        if call is None or call.run_id != run.id:
            raise CallNotFound("no such call in this run", run_id=run.id, call_id=call_id)
        if call.state != CallState.OPEN and call.id != damaged:
            raise NoOpenCall("the call is not uncertain", call_id=call_id, state=call.state)
        return call
    call = _damaged_call(tx, run)
    if call is not None:
        return call
    open_calls = tx.calls.list(run.id, [CallState.OPEN])
    return open_calls[-1] if open_calls else None  # the innermost, most recent intent


def _damaged_call(tx: StoreTx, run: Run) -> Call | None:
    damaged = decision_fit.damaged_call_id(run)
    call = tx.calls.get(damaged) if damaged is not None else None
    if (
        call is not None
        and call.run_id == run.id
        and call.state in (CallState.OPEN, *RESULT_STATES)
    ):
        return call
    return None


def _close(tx: StoreTx, call: Call, state: str, now: float, result: object = None) -> None:
    has_result = state == CallState.COMPLETED
    tx.calls.update(
        dataclasses.replace(
            call,
            state=state,
            result=result if has_result else None,
            result_digest=digest(result) if has_result else None,
            closed_at=now,
        )
    )


def apply_decision(tx: StoreTx, request: DecisionRequest, now: float) -> DecisionOutcome:
    """Apply one of the five decisions (checked, its note masked by the journal)."""
    run_id, decision = request.run_id, request.decision
    run, prior = on_version(tx, request, request.call_id)
    if prior is not None:
        return prior
    target: Call | None
    if decision == DecisionKind.STOP:
        if run.status not in OPEN_RUN_STATUSES:
            raise InvalidTransition(
                f"the run is already {run.status}",
                run_id=run_id,
                status=run.status,
                wanted=RunStatus.STOPPED,
            )
        open_calls = tx.calls.list(run_id, [CallState.OPEN])
        for call in open_calls:
            _close(tx, call, CallState.ABANDONED, now)
        target = open_calls[-1] if open_calls else _damaged_call(tx, run)
        updated = bump(
            tx, run, now, status=RunStatus.STOPPED, reason="stopped_by_decision", reason_detail=None
        )
    else:
        if run.status != RunStatus.NEEDS_ATTENTION:
            raise RunNotHeld(
                "the run is not waiting for a decision", run_id=run_id, status=run.status
            )
        if decision == DecisionKind.RESUME:  # resume that would only be held again
            why = decision_fit.refusal(run, tx.calls.list(run_id), decision)
            if why is not None:
                raise DecisionNotApplicable(why, run_id=run_id, decision=decision)
        target = _target_call(tx, run, request.call_id)
        if target is None and decision != DecisionKind.RESUME:
            raise NoOpenCall("the run has no uncertain call to decide on", run_id=run_id)
        if target is not None:
            if decision == DecisionKind.RESUME:
                _close(tx, target, CallState.ABANDONED, now)
            elif decision == DecisionKind.NEW_ATTEMPT:
                _close(tx, target, CallState.SUPERSEDED, now)
            elif decision == DecisionKind.CONFIRMED_COMPLETED:
                result = {"confirmed_completed": True, "actor": request.actor, "note": request.note}
                _close(tx, target, CallState.COMPLETED, now, result)
            else:
                _close(tx, target, CallState.NOT_COMPLETED, now)
        updated = bump(tx, run, now, status=RunStatus.ACTIVE, reason=None, reason_detail=None)
    return record(tx, request, target.id if target else None, updated, now)


def on_version(
    tx: StoreTx, request: DecisionRequest, call_id: str | None
) -> tuple[Run, DecisionOutcome | None]:
    """The run, and the outcome of the same decision already made on ``request.version``
    (asked again: applied once); ``StaleVersion`` when another decision was made on that
    version or the run has moved on since."""
    run = load_run(tx, request.run_id)
    prior = tx.decisions.on_version(run.id, request.version)
    if (
        prior is not None
        and prior.decision == request.decision
        and call_id in (None, prior.call_id)
    ):
        return run, DecisionOutcome(prior, run, applied=False)
    if prior is not None or request.version != run.version:
        raise stale(run, request.version)
    return run, None


def record(
    tx: StoreTx, request: DecisionRequest, call_id: str | None, run: Run, now: float
) -> DecisionOutcome:
    """Record the decision, applied to ``call_id``; ``run`` is the run it left."""
    applied = request.applied(call_id, now)
    applied = dataclasses.replace(applied, id=tx.decisions.insert(applied))
    return DecisionOutcome(applied, run, applied=True)
