"""Which decisions fit a run, and why the others do not (#23).

``fitting(run, calls)`` is pure: the run and its calls in, one ``Fit`` per decision out (the
five of DESIGN section 5 and ``retry_model_call``), in the order the Recovery panel shows
them. The journal refuses a decision that does not fit (``decision_not_applicable``) with
the same words, so the panel, the API and the CLI never offer what the server refuses.

- ``model_failed``: retry_model_call and stop. Not resume (the failed call would fail
  again at once), nor new_attempt or the confirmations (no call is open: the failure is
  recorded).
- ``replay_divergence``: retry_model_call when the diverging position holds a model call,
  and stop. Not resume (the loop would ask for the same, different call again), nor the
  decisions on an open call (there is none at that position).
- ``uncertain_call`` at a model call: the five and retry_model_call.
- any other hold with an open (or damaged) call: the five; no model call to retry.
- any other hold without one: resume and stop (nothing to run again or confirm).
- an active run: stop (it is not waiting for a decision); an ended run: nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from durability.records import OPEN_RUN_STATUSES, RESULT_STATES, Call, Run
from durability.status import CallKind, CallState, DecisionKind, HoldReason, RunStatus

#: A person's decision that grants model retries and runs the held model call again.
RETRY_MODEL_CALL = "retry_model_call"
ORDER = (
    RETRY_MODEL_CALL,
    DecisionKind.RESUME,
    DecisionKind.NEW_ATTEMPT,
    DecisionKind.CONFIRMED_COMPLETED,
    DecisionKind.CONFIRMED_NOT_COMPLETED,
    DecisionKind.STOP,
)
_ON_A_CALL = (
    DecisionKind.NEW_ATTEMPT,
    DecisionKind.CONFIRMED_COMPLETED,
    DecisionKind.CONFIRMED_NOT_COMPLETED,
)


@dataclass(frozen=True)
class Fit:
    decision: str
    allowed: bool
    why: str  # why it fits, or why not

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "allowed": self.allowed, "why": self.why}


def damaged_call_id(run: Run) -> str | None:
    """The call a ``corrupt_record`` hold names (its damaged result is what is decided on)."""
    detail = run.reason_detail
    if run.reason != HoldReason.CORRUPT_RECORD or not isinstance(detail, dict):
        return None
    call_id = detail.get("call_id")
    return call_id if isinstance(call_id, str) else None


def decided_call(run: Run, calls: Sequence[Call]) -> Call | None:
    """The call the five decisions act on: the damaged one, else the newest open one."""
    damaged = damaged_call_id(run)
    for call in calls:
        if call.id == damaged and call.state in (CallState.OPEN, *RESULT_STATES):
            return call
    open_calls = [c for c in calls if c.state == CallState.OPEN]
    return open_calls[-1] if open_calls else None


def held_model_call(run: Run, calls: Sequence[Call]) -> Call | None:
    """The model call a ``retry_model_call`` runs again, or None: the failed call of a
    ``model_failed`` hold, the newest call at a ``replay_divergence`` position when it is a
    model call, the open model call of an ``uncertain_call`` hold."""
    detail = run.reason_detail if isinstance(run.reason_detail, dict) else {}
    found: Call | None = None
    if run.reason == HoldReason.MODEL_FAILED:
        named = detail.get("call_id")
        failed = [c for c in calls if c.state == CallState.FAILED and c.kind == CallKind.MODEL]
        found = next((c for c in failed if c.id == named), failed[-1] if failed else None)
    elif run.reason == HoldReason.REPLAY_DIVERGENCE:
        at = [
            c for c in calls if (c.agent_no, c.seq) == (detail.get("agent_no"), detail.get("seq"))
        ]
        found = max(at, key=lambda c: c.attempt) if at else None
    elif run.reason == HoldReason.UNCERTAIN_CALL:
        found = decided_call(run, calls)
    if found is None or found.kind != CallKind.MODEL:
        return None
    return found


def fitting(run: Run, calls: Sequence[Call]) -> list[Fit]:
    """One ``Fit`` per decision, in ``ORDER``; see the module docstring."""
    if run.status not in OPEN_RUN_STATUSES:
        return [Fit(d, False, f"the run has ended ({run.status})") for d in ORDER]
    if run.status != RunStatus.NEEDS_ATTENTION:
        return [
            Fit(d, True, "ends the run")
            if d == DecisionKind.STOP
            else Fit(d, False, "the run is not waiting for a decision")
            for d in ORDER
        ]
    model = held_model_call(run, calls)
    target = decided_call(run, calls)
    fits = []
    for decision in ORDER:
        fits.append(_fit(decision, run, model, target))
    return fits


def _fit(decision: str, run: Run, model: Call | None, target: Call | None) -> Fit:
    reason = run.reason
    if decision == DecisionKind.STOP:
        return Fit(decision, True, "ends the run; nothing more runs")
    if decision == RETRY_MODEL_CALL:
        if model is None:
            return Fit(decision, False, "no model call is held: there is nothing to retry")
        return Fit(decision, True, f"calls the model again at position {model.seq} (granted)")
    if reason == HoldReason.MODEL_FAILED:
        if decision == DecisionKind.RESUME:
            why = "the failed model call would fail again at once: retry it or stop"
            return Fit(decision, False, why)
        return Fit(decision, False, "no call is open: the model's failure is recorded")
    if reason == HoldReason.REPLAY_DIVERGENCE:
        if decision == DecisionKind.RESUME:
            why = "the agent would ask for the same different call again and be held again"
            return Fit(decision, False, why)
        return Fit(decision, False, "no call is open at the diverging position")
    if decision in _ON_A_CALL and target is None:
        return Fit(decision, False, "no call is uncertain: nothing to run again or confirm")
    if decision == DecisionKind.RESUME:
        return Fit(decision, True, "continues from the last safe checkpoint")
    return Fit(
        decision,
        True,
        f"acts on call {target.name if target else ''} at position {target.seq if target else ''}",
    )


def refusal(run: Run, calls: Sequence[Call], decision: str) -> str | None:
    """Why ``decision`` does not fit the run now, or None when it does."""
    for fit in fitting(run, calls):
        if fit.decision == decision:
            return None if fit.allowed else fit.why
    return f"unknown decision {decision!r}"
