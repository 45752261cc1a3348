"""The start-up scan: gather each non-terminal run's evidence and carry out the verdict.

The rules themselves (DESIGN.md section 5) are durability/verdicts.py's ``judge``; this
module reads what it needs (the checkpoint, the damaged records, the recovery attempts, the
pins, the receipts), asks it, and records the answer. The agent-side glue
(python/durable/resume.py at start-up, python/durable/shared.py on a takeover) rebuilds the
chats and resumes the runs it is told to.

| verdict | plan |
| --- | --- |
| ``skip`` (already held) | ``skip``: never re-queued, its version does not change |
| ``hold`` (run or call) | ``hold`` with the verdict's reason and detail |
| ``resume``; open calls ``child``, ``replay``, ``run``, ``receipt`` | ``resume`` + permits |
| an open call ``watch`` (its shell still runs) | ``resume`` + permit ``watch`` (the loop waits) |
| open model call, a standing grant pays (``retry``) | ``resume``: superseded, use recorded |
| classifying the run raised (any exception) | ``hold`` (recovery_error); the others go on |
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from durability import integrity, replay
from durability.errors import CorruptCheckpoint, CorruptRecord, DurabilityError
from durability.journal import Journal
from durability.records import Call, Run, fields_of
from durability.status import (
    ADAPTER_PREFIX,
    CallKind,
    CallState,
    HoldReason,
    Permit,
    PlanAction,
    Policy,
    ReceiptOutcome,
    RunStatus,
)
from durability.verdicts import Action, AdapterVerdict, Evidence, Why, judge, to_verdict

__all__ = ["AdapterVerdict", "RecoveryPlan", "apply_plan", "classify_run", "scan", "to_verdict"]

#: Longest exception message kept in a recovery_error detail (it is masked as well).
ERROR_MESSAGE_CHARS = 500

#: Consecutive recovery attempts that made no progress before a run is parked.
MAX_RECOVERY_ATTEMPTS = 3
CHILD_POLICY = Policy.CHILD
HOLD_POLICY = Policy.HOLD  # nothing proves the outcome: an open intent is held for a person
SAFE_REPLAY_POLICY = Policy.SAFE_REPLAY

#: A run -> the (scope, target) pairs whose standing grants cover it (chat, task, profile;
#: the glue knows them): an open model call found at recovery is retried when one pays.
Scopes = Callable[[Run], Sequence[tuple[str, str]]]

#: policy name (e.g. "adapter:shell") -> callable(call) -> verdict. A verdict may also be
#: given as a string ("completed", "not_started", "unknown", "rejected:<reason>") or a
#: tuple ("completed", output).
Adapter = Callable[[Call], Any]


@dataclass
class RecoveryPlan:
    """What to do with one run found open at start-up."""

    run: Run
    action: str  # a PlanAction: resume | hold | skip
    reason: str | None = None
    detail: dict[str, Any] | None = None
    permits: dict[str, str] = field(default_factory=dict)  # call id -> replay | run
    receipts: dict[str, Any] = field(default_factory=dict)  # call id -> proven output
    retries: list[str] = field(default_factory=list)  # open model calls a standing grant pays
    scopes: Sequence[tuple[str, str]] = ()  # whose standing grants cover the run


def _position(call: Call) -> dict[str, Any]:
    """Where the call sits, as a recovery hold records it."""
    return fields_of(call, "call_id=id", "kind", "name", "agent_no", "seq", "attempt", "policy")


def error_detail(exc: BaseException, stage: str) -> dict[str, Any]:
    """What a ``recovery_error`` hold records about an exception: its type and (shortened)
    message, never a traceback; the journal masks secrets in it."""
    if isinstance(exc, DurabilityError):
        return {"stage": stage, "type": type(exc).__name__, **exc.to_dict()}
    message = str(exc)[:ERROR_MESSAGE_CHARS]
    return {"stage": stage, "type": type(exc).__name__, "message": message}


def _progress(journal: Journal, run_id: str) -> int:
    return sum(1 for c in journal.list_calls(run_id) if c.state != CallState.OPEN)


def _stalled_attempts(journal: Journal, run: Run, progress: int) -> int:
    """Recovery attempts in a row (most recent first) that found the same progress, since
    the run's last decision (a person's decision starts the count afresh). Each event whose
    payload is used is checked first (CorruptRecord)."""
    decided = max((d.created_at for d in journal.list_decisions(run.id)), default=None)
    events = journal.list_events(run_id=run.id, limit=100_000, verify=False)
    count = 0
    for event in reversed([e for e in events if e.type == "recovery_attempt"]):
        if decided is not None and event.created_at <= decided:
            break
        payload = integrity.require_event(event).payload
        if not isinstance(payload, dict) or payload.get("progress") != progress:
            break
        count += 1
    return count


def _input_damage(journal: Journal, run: Run) -> integrity.Damage | None:
    """The run's journaled input, which a resume without a checkpoint starts from."""
    events = journal.list_events(run_id=run.id, limit=100_000, verify=False)
    first = next((e for e in events if e.type == "input"), None)
    return None if first is None else integrity.event_damage(first)


def _ask_adapter(adapter: Adapter, call: Call) -> AdapterVerdict:
    try:
        return to_verdict(adapter(call))
    except Exception as exc:  # an adapter failure proves nothing
        reason = f"adapter_error: {type(exc).__name__}"
        return AdapterVerdict(ReceiptOutcome.REJECTED, reason=reason)


def _call_evidence(
    call: Call, adapters: Mapping[str, Adapter], is_safe: Callable[[str], bool]
) -> Evidence:
    """An open call's evidence: its pin (safe_replay) or its receipt (an adapter policy)."""
    pinned, receipt, alive = False, None, False
    if call.kind == CallKind.TOOL and call.policy == Policy.SAFE_REPLAY:
        pinned = is_safe(call.name)
    elif call.kind == CallKind.TOOL and call.policy.startswith(ADAPTER_PREFIX):
        adapter = adapters.get(call.policy)
        receipt = None if adapter is None else _ask_adapter(adapter, call)
        alive = receipt is not None and bool((receipt.detail or {}).get("shell_alive"))
    return Evidence(
        recovering=True, known=True, pinned=pinned, receipt=receipt, process_alive=alive
    )


def _run_evidence(journal: Journal, run: Run, max_attempts: int) -> tuple[Evidence, list[Call]]:
    """The run's evidence (and its calls); nothing more is read once one thing holds it."""
    if run.status == RunStatus.NEEDS_ATTENTION:
        return Evidence(held=True), []
    try:
        checkpoint = journal.latest_checkpoint(run.id)
    except CorruptCheckpoint as exc:
        return Evidence(checkpoint_damage=exc.to_dict()), []
    calls = journal.list_calls(run.id)
    damage = next(integrity.run_call_damages(calls), None)
    if damage is None and checkpoint is None:
        damage = _input_damage(journal, run)
    if damage is not None:
        return Evidence(record_damage=damage.to_dict()), calls
    progress = sum(1 for c in calls if c.state != CallState.OPEN)
    try:
        stalled = _stalled_attempts(journal, run, progress)
    except CorruptRecord as exc:
        return Evidence(record_damage=exc.fields), calls
    if stalled >= max_attempts:
        return Evidence(stalled={"attempts": max_attempts, "progress": progress}), calls
    return Evidence(), calls


def _default_is_safe(tool_name: str) -> bool:
    return replay.is_safe(tool_name, replay.tool_source_path(tool_name))


def classify_run(
    journal: Journal,
    run: Run,
    *,
    adapters: Mapping[str, Adapter] | None = None,
    is_safe: Callable[[str], bool] = _default_is_safe,
    max_attempts: int = MAX_RECOVERY_ATTEMPTS,
    scopes_of: Scopes | None = None,
) -> RecoveryPlan:
    """Decide, without changing anything but receipt events, what recovery does."""
    evidence, calls = _run_evidence(journal, run, max_attempts)
    scopes = list(scopes_of(run)) if scopes_of is not None else []
    verdict = judge(None, evidence)
    if verdict.action is Action.SKIP:
        return RecoveryPlan(run, PlanAction.SKIP, run.reason, run.reason_detail)
    if verdict.action is Action.HOLD:
        return RecoveryPlan(run, PlanAction.HOLD, verdict.reason, verdict.hold_detail())
    plan = RecoveryPlan(run, PlanAction.RESUME, scopes=scopes)
    for call in [c for c in calls if c.state == CallState.OPEN]:
        call_evidence = _call_evidence(call, adapters or {}, is_safe)
        if call.kind == CallKind.MODEL and scopes:
            granted = journal.standing_grant_for(run.id, scopes) is not None
            call_evidence = replace(call_evidence, grant=granted)
        verdict = judge(call, call_evidence)
        if verdict.action is Action.RETRY:
            plan.retries.append(call.id)
        elif verdict.action is Action.RECEIPT and call_evidence.receipt is not None:
            plan.receipts[call.id] = call_evidence.receipt.output
        elif verdict.action in (Action.REPLAY, Action.RUN):
            plan.permits[call.id] = Permit(verdict.action)
        elif verdict.action is Action.WATCH:  # the loop waits for its exit marker
            plan.permits[call.id] = Permit.WATCH
        elif verdict.action is Action.HOLD:
            if verdict.why is Why.RECEIPT_REJECTED:
                reason = call_evidence.receipt.reason if call_evidence.receipt else None
                journal.append_event(
                    run.context_id,
                    "receipt_rejected",
                    {"call_id": call.id, "reason": reason},
                    run_id=run.id,
                )
            detail = verdict.hold_detail(_position(call))
            return RecoveryPlan(run, PlanAction.HOLD, verdict.reason, detail)
    return plan


def apply_plan(journal: Journal, plan: RecoveryPlan) -> RecoveryPlan:
    """Record the plan: hold the run, or commit proven receipts and count the attempt."""
    run = plan.run
    if plan.action == PlanAction.HOLD:
        reason = plan.reason or HoldReason.HELD
        plan.run = journal.mark_needs_attention(run.id, reason, plan.detail)
    elif plan.action == PlanAction.RESUME:
        for call_id in plan.retries:  # paid by a standing grant: the use is recorded
            if not journal.use_standing_grant(run.id, call_id, plan.scopes):
                detail = {"call_id": call_id, "why": Why.MODEL_CALL_OUTCOME_UNKNOWN}
                plan.action, plan.reason = PlanAction.HOLD, HoldReason.UNCERTAIN_CALL
                plan.detail = detail
                return apply_plan(journal, plan)
            journal.append_event(
                run.context_id, "standing_grant_used", {"call_id": call_id}, run_id=run.id
            )
        for call_id, output in plan.receipts.items():
            journal.commit_result(call_id, {"receipt": output})
        progress = _progress(journal, run.id)
        journal.append_event(
            run.context_id, "recovery_attempt", {"progress": progress}, run_id=run.id
        )
        plan.run = journal.note_recovery_attempt(run.id)
    return plan


def scan(
    journal: Journal,
    *,
    adapters: Mapping[str, Adapter] | None = None,
    is_safe: Callable[[str], bool] = _default_is_safe,
    max_attempts: int = MAX_RECOVERY_ATTEMPTS,
    scopes_of: Scopes | None = None,
) -> list[RecoveryPlan]:
    """Classify and record every non-terminal run; the caller resumes the ``resume`` plans."""
    plans = []
    for run in journal.list_nonterminal_runs():
        try:
            plan = classify_run(
                journal,
                run,
                adapters=adapters,
                is_safe=is_safe,
                max_attempts=max_attempts,
                scopes_of=scopes_of,
            )
            plans.append(apply_plan(journal, plan))
        except Exception as exc:  # one bad run never stops the scan of the others
            detail = error_detail(exc, "scan")
            held = RecoveryPlan(run, PlanAction.HOLD, HoldReason.RECOVERY_ERROR, detail)
            try:
                plans.append(apply_plan(journal, held))
            except Exception:
                plans.append(held)
    return plans
