"""The start-up scan: classify every non-terminal run as DESIGN.md section 5 says.

Policy only: this module decides, the journal records, and the agent-side glue
(python/durable/resume.py) rebuilds the chats and resumes the runs it is told to.

| found | plan |
| --- | --- |
| run already held | ``skip``: never re-queued, its version does not change |
| checkpoint corrupt | ``hold`` (corrupt_checkpoint), nothing repaired |
| a record the resume would use is damaged | ``hold`` (corrupt_record), nothing repaired |
| recovery keeps failing without progress | ``hold`` (recovery_attempts_exceeded) |
| no open intent | ``resume`` |
| open subordinate intent (child workflow) | the child resumes inside the run |
| open tool intent, safe_replay and pin matches | ``resume`` with a ``replay`` permit |
| open intent, adapter policy, adapter proves completed | result committed from the receipt |
| open intent, adapter proves not started | ``resume`` with a ``run`` permit |
| anything else (model calls included) | ``hold`` (uncertain_call) |
| classifying the run raised (any exception) | ``hold`` (recovery_error); the others go on |
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from durability import integrity, replay
from durability.errors import CorruptCheckpoint, CorruptRecord, DurabilityError
from durability.journal import Journal
from durability.records import Call, Run

#: Longest exception message kept in a recovery_error detail (it is masked as well).
ERROR_MESSAGE_CHARS = 500

#: Consecutive recovery attempts that made no progress before a run is parked.
MAX_RECOVERY_ATTEMPTS = 3
CHILD_POLICY = "child"
HOLD_POLICY = "hold"  # nothing proves the outcome: an open intent is held for a person
SAFE_REPLAY_POLICY = "safe_replay"
ADAPTER_PREFIX = "adapter:"


@dataclass(frozen=True)
class AdapterVerdict:
    """What a receipt adapter proves about one open call."""

    outcome: str  # completed | not_started | unknown | rejected
    output: Any = None  # the recorded output, for completed
    reason: str | None = None  # for rejected


#: policy name (e.g. "adapter:shell") -> callable(call) -> verdict. A verdict may also be
#: given as a string ("completed", "not_started", "unknown", "rejected:<reason>") or a
#: tuple ("completed", output).
Adapter = Callable[[Call], Any]


def to_verdict(value: Any) -> AdapterVerdict:
    """Normalise an adapter's answer; anything malformed counts as rejected."""
    if isinstance(value, AdapterVerdict):
        return value
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "completed":
        return AdapterVerdict("completed", output=value[1])
    if isinstance(value, str):
        if value in ("completed", "not_started", "unknown"):
            return AdapterVerdict(value)
        if value.startswith("rejected"):
            return AdapterVerdict("rejected", reason=value.partition(":")[2] or "rejected")
    return AdapterVerdict("rejected", reason="malformed_verdict")


@dataclass
class RecoveryPlan:
    """What to do with one run found open at start-up."""

    run: Run
    action: str  # resume | hold | skip
    reason: str | None = None
    detail: dict[str, Any] | None = None
    permits: dict[str, str] = field(default_factory=dict)  # call id -> replay | run
    receipts: dict[str, Any] = field(default_factory=dict)  # call id -> proven output


def _call_detail(call: Call, why: str) -> dict[str, Any]:
    return {
        "call_id": call.id,
        "kind": call.kind,
        "name": call.name,
        "agent_no": call.agent_no,
        "seq": call.seq,
        "attempt": call.attempt,
        "policy": call.policy,
        "why": why,
    }


def error_detail(exc: BaseException, stage: str) -> dict[str, Any]:
    """What a ``recovery_error`` hold records about an exception: its type and (shortened)
    message, never a traceback; the journal masks secrets in it."""
    if isinstance(exc, DurabilityError):
        return {"stage": stage, "type": type(exc).__name__, **exc.to_dict()}
    message = str(exc)[:ERROR_MESSAGE_CHARS]
    return {"stage": stage, "type": type(exc).__name__, "message": message}


def _progress(journal: Journal, run_id: str) -> int:
    return sum(1 for c in journal.list_calls(run_id) if c.state != "open")


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


def _classify_call(
    journal: Journal,
    run: Run,
    call: Call,
    plan: RecoveryPlan,
    adapters: Mapping[str, Adapter],
    is_safe: Callable[[str], bool],
) -> dict[str, Any] | None:
    """Fill the plan for one open call; return a hold detail when it cannot be proven."""
    if call.kind == "subordinate":
        return None if call.policy == CHILD_POLICY else _call_detail(call, "child_not_pinned")
    if call.kind == "model":
        return _call_detail(call, "model_call_outcome_unknown")
    if call.policy == SAFE_REPLAY_POLICY:
        if is_safe(call.name):
            plan.permits[call.id] = "replay"
            return None
        return _call_detail(call, "pin_mismatch")
    if call.policy.startswith(ADAPTER_PREFIX):
        adapter = adapters.get(call.policy)
        if adapter is None:
            return _call_detail(call, "no_adapter")
        try:
            verdict = to_verdict(adapter(call))
        except Exception as exc:  # an adapter failure proves nothing
            verdict = AdapterVerdict("rejected", reason=f"adapter_error: {type(exc).__name__}")
        if verdict.outcome == "completed":
            plan.receipts[call.id] = verdict.output
            return None
        if verdict.outcome == "not_started":
            plan.permits[call.id] = "run"
            return None
        if verdict.outcome == "rejected":
            journal.append_event(
                run.context_id,
                "receipt_rejected",
                {"call_id": call.id, "reason": verdict.reason},
                run_id=run.id,
            )
            return {**_call_detail(call, "receipt_rejected"), "receipt_reason": verdict.reason}
        return _call_detail(call, "receipt_unknown")
    return _call_detail(call, "no_replay_policy")


def _default_is_safe(tool_name: str) -> bool:
    return replay.is_safe(tool_name, replay.tool_source_path(tool_name))


def classify_run(
    journal: Journal,
    run: Run,
    *,
    adapters: Mapping[str, Adapter] | None = None,
    is_safe: Callable[[str], bool] = _default_is_safe,
    max_attempts: int = MAX_RECOVERY_ATTEMPTS,
) -> RecoveryPlan:
    """Decide, without changing anything but receipt events, what recovery does."""
    if run.status == "needs_attention":
        return RecoveryPlan(run, "skip", run.reason, run.reason_detail)
    try:
        checkpoint = journal.latest_checkpoint(run.id)
    except CorruptCheckpoint as exc:
        return RecoveryPlan(run, "hold", "corrupt_checkpoint", exc.to_dict())
    calls = journal.list_calls(run.id)
    damage = next(integrity.run_call_damages(calls), None)
    if damage is None and checkpoint is None:
        damage = _input_damage(journal, run)
    if damage is not None:
        return RecoveryPlan(run, "hold", "corrupt_record", damage.to_dict())
    progress = sum(1 for c in calls if c.state != "open")
    try:
        stalled = _stalled_attempts(journal, run, progress)
    except CorruptRecord as exc:
        return RecoveryPlan(run, "hold", "corrupt_record", exc.fields)
    if stalled >= max_attempts:
        parked = {"attempts": max_attempts, "progress": progress}
        return RecoveryPlan(run, "hold", "recovery_attempts_exceeded", parked)
    plan = RecoveryPlan(run, "resume")
    for call in [c for c in calls if c.state == "open"]:
        detail = _classify_call(journal, run, call, plan, adapters or {}, is_safe)
        if detail is not None:
            return RecoveryPlan(run, "hold", "uncertain_call", detail)
    return plan


def apply_plan(journal: Journal, plan: RecoveryPlan) -> RecoveryPlan:
    """Record the plan: hold the run, or commit proven receipts and count the attempt."""
    run = plan.run
    if plan.action == "hold":
        plan.run = journal.mark_needs_attention(run.id, plan.reason or "held", plan.detail)
    elif plan.action == "resume":
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
) -> list[RecoveryPlan]:
    """Classify and record every non-terminal run; the caller resumes the ``resume`` plans."""
    plans = []
    for run in journal.list_nonterminal_runs():
        try:
            plan = classify_run(
                journal, run, adapters=adapters, is_safe=is_safe, max_attempts=max_attempts
            )
            plans.append(apply_plan(journal, plan))
        except Exception as exc:  # one bad run never stops the scan of the others
            held = RecoveryPlan(run, "hold", "recovery_error", error_detail(exc, "scan"))
            try:
                plans.append(apply_plan(journal, held))
            except Exception:
                plans.append(held)
    return plans
