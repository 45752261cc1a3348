"""DESIGN.md section 5 in one pure function: a call and its evidence in, a verdict out.

``judge(call, evidence)`` reads nothing and writes nothing; its callers gather the
evidence (the journal, the receipts, the pins, a retry grant) and carry the verdict out:
start-up recovery and a takeover (durability/recovery.py, per open run and per open call)
and the two seams (python/durable/seams.py, per call the loop asks for). The rules, in the
order they apply:

| found | verdict |
| --- | --- |
| the run already waits for a person | ``skip`` (never re-queued, version unchanged) |
| the latest checkpoint is corrupt | ``hold`` corrupt_checkpoint |
| a record the resume or the call would use is damaged | ``hold`` corrupt_record |
| recovery kept failing without progress | ``hold`` recovery_attempts_exceeded |
| the intent at this position has another fingerprint | ``hold`` replay_divergence |
| no open call (the run as a whole) | ``resume`` |
| a committed failure of a tool, a repairable or a utility model failure | ``fail`` (again) |
| a committed model failure proven never sent (``sent: false``) | ``fail`` (again) |
| a committed model failure, a retry grant not asked yet | ``ask_grant`` |
| ... a retry grant was used | ``retry`` (same position, attempt + 1) |
| ... no retry grant | ``hold`` model_failed |
| abandoned (outcome unknown, left behind) | ``abandoned`` |
| a completed subordinate child workflow | ``child`` (runs again; its answer differs: ``hold``) |
| committed, cut by an intervention | ``hold`` replay_divergence |
| committed model call without a reply (a person confirmed it) | ``next`` |
| committed result | ``reuse`` |
| open, the loop asks: a fresh intent (not open before the resume) | ``run`` |
| open model call found at a resume | ``hold`` uncertain_call |
| embedding (``safe_replay`` model call) done / failed / open | ``reuse``/``fail``/``replay`` |
| open child workflow (pinned: call_subordinate, browser_agent) | ``child`` |
| open, the loop asks: recovery permitted it | ``replay`` / ``run`` / ``watch`` |
| open, the loop asks: recovery did not | ``hold`` uncertain_call (not_proven) |
| open model call at recovery, a standing retry grant covers the run | ``retry`` |
| open at recovery, safe_replay and its pin matches | ``replay`` (else ``hold``, pin_mismatch) |
| open at recovery, an adapter proves it completed | ``receipt`` (commit its recorded output) |
| ... proves it never started | ``run`` |
| ... its process is still alive | ``watch`` |
| ... its host cannot be asked (SSH) | ``hold`` uncertain_call (host_unreachable) |
| ... an input's delivery marker matches (``adapter:pty``) | ``receipt`` (delivered) |
| ... an input never handed over, or its handover voided unclaimed | ``run`` (deliver it) |
| ... an input claimed by the terminal, no marker | ``hold`` uncertain_call (delivery_unknown) |
| ... rejected, unknown, no adapter | ``hold`` uncertain_call |
| open at recovery, ``journal_atomic`` | ``run`` (no result means no effect) |
| anything else | ``hold`` uncertain_call |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from durability.records import Call
from durability.status import (
    ADAPTER_PREFIX,
    CallKind,
    CallState,
    HoldReason,
    Permit,
    Policy,
    ReceiptOutcome,
)


class Action(StrEnum):
    """What the caller does with the call (or the run)."""

    SKIP = "skip"  # the run already waits for a person: leave it alone
    RESUME = "resume"  # the run: nothing stops it, resume it
    REUSE = "reuse"  # a committed result stands: nothing runs again
    NEXT = "next"  # nothing to reuse at this position: the loop asks at the next one
    ABANDONED = "abandoned"  # outcome unknown, left behind by a decision
    FAIL = "fail"  # a committed failure: it is raised again as the first time
    ASK_GRANT = "ask_grant"  # retry or hold: use a retry grant (if any) and judge again
    RETRY = "retry"  # a retry grant was used: the same position again, attempt + 1
    CHILD = "child"  # a child workflow: it resumes (runs again) inside the run
    REPLAY = "replay"  # a safe-replay tool: run it again
    RECEIPT = "receipt"  # an adapter proved it completed: its recorded output is the result
    RUN = "run"  # it never started (or may run again): run the effect
    WATCH = "watch"  # its process still runs: reconcile from its receipt when it ends
    HOLD = "hold"  # nothing proves the outcome: a person decides


class Why(StrEnum):
    """The ``why`` a call-level hold records next to the call's position."""

    INTERRUPTED = "interrupted"
    CHILD_RESULT = "child_result"
    MODEL_CALL = "model_call"  # the loop met a model call open before the resume
    NOT_PROVEN = "not_proven"  # the loop met a call recovery did not permit
    MODEL_CALL_OUTCOME_UNKNOWN = "model_call_outcome_unknown"
    CHILD_NOT_PINNED = "child_not_pinned"
    PIN_MISMATCH = "pin_mismatch"
    NO_ADAPTER = "no_adapter"
    RECEIPT_REJECTED = "receipt_rejected"
    RECEIPT_UNKNOWN = "receipt_unknown"
    NO_REPLAY_POLICY = "no_replay_policy"
    RUN_ENDED_WITH_OPEN_CALL = "run_ended_with_open_call"
    HOST_UNREACHABLE = "host_unreachable"  # the SSH host holding the receipt did not answer
    PROCESS_ENDED = "process_ended"  # watched: its process died without an exit marker
    WATCH_TIMED_OUT = "watch_timed_out"  # watched: the tool's maximum time passed
    LOCAL_RECEIPT_ELSEWHERE = "local_receipt_elsewhere"  # another worker's folder holds it
    DELIVERY_UNKNOWN = "delivery_unknown"  # an input was claimed by its terminal, no marker


@dataclass(frozen=True)
class AdapterVerdict:
    """What a receipt adapter proves about one open call."""

    outcome: str  # a ReceiptOutcome
    output: Any = None  # the recorded output, for completed
    reason: str | None = None  # for rejected and host_unreachable
    detail: Mapping[str, Any] | None = None  # what the receipt shows (pid alive, host, ...)


def to_verdict(value: Any) -> AdapterVerdict:
    """Normalise an adapter's answer; anything malformed counts as rejected."""
    if isinstance(value, AdapterVerdict):
        return value
    if isinstance(value, tuple) and len(value) == 2 and value[0] == ReceiptOutcome.COMPLETED:
        return AdapterVerdict(ReceiptOutcome.COMPLETED, output=value[1])
    if isinstance(value, str) and value.startswith(ReceiptOutcome.HOST_UNREACHABLE):
        reason = value.partition(":")[2] or None
        return AdapterVerdict(ReceiptOutcome.HOST_UNREACHABLE, reason=reason)
    if isinstance(value, str):
        simple = (ReceiptOutcome.COMPLETED, ReceiptOutcome.NOT_STARTED, ReceiptOutcome.UNKNOWN)
        if value in simple:
            return AdapterVerdict(ReceiptOutcome(value))
        if value.startswith(ReceiptOutcome.REJECTED):
            reason = value.partition(":")[2] or ReceiptOutcome.REJECTED
            return AdapterVerdict(ReceiptOutcome.REJECTED, reason=reason)
    return AdapterVerdict(ReceiptOutcome.REJECTED, reason="malformed_verdict")


@dataclass(frozen=True)
class Evidence:
    """What the caller found. The defaults say "nothing found"."""

    # the run (start-up and takeover)
    held: bool = False  # the run already waits for a person
    checkpoint_damage: Mapping[str, Any] | None = None  # the latest checkpoint is corrupt
    record_damage: Mapping[str, Any] | None = None  # a record it would use is damaged
    stalled: Mapping[str, Any] | None = None  # recovery attempts exceeded without progress
    divergence: Mapping[str, Any] | None = None  # another fingerprint at this position
    # the call
    recovering: bool = False  # start-up or takeover judges it (else the loop asks for it)
    known: bool = False  # it was journaled before the run was resumed (open at the crash)
    permit: str | None = None  # what recovery allowed it (a Permit), when the loop asks
    pinned: bool = False  # safe_replay, and the tool's source still hashes to its pin
    receipt: AdapterVerdict | None = None  # what its adapter proves (None: no adapter)
    process_alive: bool = False  # the adapter's process still runs
    grant: bool | None = None  # a retry grant was used for it (None: not asked yet)
    utility: bool = False  # a utility model call (the loop copes with its failure)
    child_answer_differs: bool = False  # a child workflow ran again and answered otherwise


@dataclass(frozen=True)
class Verdict:
    action: Action
    reason: HoldReason | None = None  # for hold
    why: Why | None = None  # for a call-level hold
    detail: Mapping[str, Any] | None = None  # a run-level hold's detail; else added to it
    at_call: bool = False  # the hold names the call's position

    def hold_detail(self, position: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the hold records: the call's position (when it names one), its why, the rest."""
        if not self.at_call:
            return dict(self.detail or {})
        why = {} if self.why is None else {"why": self.why}
        return {**(position or {}), **why, **(self.detail or {})}


def _hold(reason: HoldReason, detail: Mapping[str, Any]) -> Verdict:
    return Verdict(Action.HOLD, reason, detail=detail)


def _uncertain(why: Why, **detail: Any) -> Verdict:
    return Verdict(Action.HOLD, HoldReason.UNCERTAIN_CALL, why, detail or None, at_call=True)


def judge(call: Call | None, evidence: Evidence) -> Verdict:
    """The verdict on ``call`` (None: on the run as a whole) given ``evidence``."""
    ev = evidence
    if ev.held:
        return Verdict(Action.SKIP)
    if ev.checkpoint_damage is not None:
        return _hold(HoldReason.CORRUPT_CHECKPOINT, ev.checkpoint_damage)
    if ev.record_damage is not None:
        return _hold(HoldReason.CORRUPT_RECORD, ev.record_damage)
    if ev.stalled is not None:
        return _hold(HoldReason.RECOVERY_ATTEMPTS_EXCEEDED, ev.stalled)
    if ev.divergence is not None:
        return _hold(HoldReason.REPLAY_DIVERGENCE, ev.divergence)
    if call is None:
        return Verdict(Action.RESUME)
    if call.state == CallState.FAILED:
        return _failed(call, ev)
    if call.state == CallState.ABANDONED:
        return Verdict(Action.ABANDONED)
    if call.state == CallState.COMPLETED:
        return _committed(call, ev)
    return _open(call, ev)


def _is_child(call: Call) -> bool:
    """A pinned child workflow (call_subordinate, browser_agent): its steps are journaled."""
    return call.kind in (CallKind.SUBORDINATE, CallKind.TOOL) and call.policy == Policy.CHILD


def _runs_again_when_done(call: Call) -> bool:
    """A finished subordinate runs again on a resume (its agent's state is rebuilt by it);
    a finished tool-kind child (browser_agent: its steps live under an agent number of their
    own) is reused like any committed result."""
    return call.kind == CallKind.SUBORDINATE and _is_child(call)


def _is_embedding(call: Call) -> bool:
    """An embedding request (python/durable/seams.py ``embedding_call``): the engine records
    it as a model call with the ``safe_replay`` policy; asking again changes nothing."""
    return call.kind == CallKind.MODEL and call.policy == Policy.SAFE_REPLAY


def _failed(call: Call, ev: Evidence) -> Verdict:
    result = call.result if isinstance(call.result, dict) else {}
    if call.kind != CallKind.MODEL or result.get("error") == "repairable" or ev.utility:
        return Verdict(Action.FAIL)
    if _is_embedding(call) or result.get("sent") is False:  # asked again / never sent
        return Verdict(Action.FAIL)
    if ev.grant is None:
        return Verdict(Action.ASK_GRANT)
    if ev.grant:
        return Verdict(Action.RETRY)
    failed = {"error": call.result}
    return Verdict(Action.HOLD, HoldReason.MODEL_FAILED, detail=failed, at_call=True)


def _committed(call: Call, ev: Evidence) -> Verdict:
    divergence = Verdict(Action.HOLD, HoldReason.REPLAY_DIVERGENCE, at_call=True)
    if _runs_again_when_done(call):
        if ev.child_answer_differs:
            return Verdict(divergence.action, divergence.reason, Why.CHILD_RESULT, at_call=True)
        return Verdict(Action.CHILD)
    result = call.result if isinstance(call.result, dict) else {}
    if result.get("interrupted"):
        return Verdict(divergence.action, divergence.reason, Why.INTERRUPTED, at_call=True)
    if _is_embedding(call):
        return Verdict(Action.REUSE)
    if call.kind == CallKind.MODEL and not isinstance(result.get("response"), str):
        return Verdict(Action.NEXT)  # confirmed by a person: no reply to reuse
    return Verdict(Action.REUSE)


def _open(call: Call, ev: Evidence) -> Verdict:
    if not ev.recovering:
        return _asked_by_loop(call, ev)
    if call.kind == CallKind.SUBORDINATE or _is_child(call):
        return Verdict(Action.CHILD) if _is_child(call) else _uncertain(Why.CHILD_NOT_PINNED)
    if _is_embedding(call):
        return Verdict(Action.REPLAY)
    if call.kind == CallKind.MODEL:  # a standing grant pays for running it again
        return Verdict(Action.RETRY) if ev.grant else _uncertain(Why.MODEL_CALL_OUTCOME_UNKNOWN)
    if call.policy == Policy.SAFE_REPLAY:
        return Verdict(Action.REPLAY) if ev.pinned else _uncertain(Why.PIN_MISMATCH)
    if call.policy == Policy.JOURNAL_ATOMIC:
        return Verdict(Action.RUN)  # its effect commits with its result: none happened
    if call.policy.startswith(ADAPTER_PREFIX):
        return _receipt(ev)
    return _uncertain(Why.NO_REPLAY_POLICY)


#: What a receipt proves that decides alone: the recorded output stands, or the effect runs.
_PROVEN: dict[str, Action] = {
    ReceiptOutcome.COMPLETED: Action.RECEIPT,
    ReceiptOutcome.NOT_STARTED: Action.RUN,
}
#: What recovery permitted an open call found at start-up (or on a takeover).
_PERMITTED: dict[str, Action] = {
    Permit.REPLAY: Action.REPLAY,
    Permit.RUN: Action.RUN,
    Permit.WATCH: Action.WATCH,
}


def _receipt(ev: Evidence) -> Verdict:
    receipt = ev.receipt
    if receipt is None:
        return _uncertain(Why.NO_ADAPTER)
    if receipt.outcome in _PROVEN:
        return Verdict(_PROVEN[receipt.outcome])
    if receipt.outcome == ReceiptOutcome.REJECTED:
        if receipt.reason == Why.LOCAL_RECEIPT_ELSEWHERE:
            return _uncertain(Why.LOCAL_RECEIPT_ELSEWHERE, **dict(receipt.detail or {}))
        return _uncertain(Why.RECEIPT_REJECTED, receipt_reason=receipt.reason)
    if receipt.outcome == ReceiptOutcome.HOST_UNREACHABLE:
        found = {"receipt_reason": receipt.reason, **dict(receipt.detail or {})}
        return _uncertain(Why.HOST_UNREACHABLE, **found)
    if receipt.reason == Why.DELIVERY_UNKNOWN:
        return _uncertain(Why.DELIVERY_UNKNOWN, **dict(receipt.detail or {}))
    if ev.process_alive:
        return Verdict(Action.WATCH)
    return _uncertain(Why.RECEIPT_UNKNOWN)


def _asked_by_loop(call: Call, ev: Evidence) -> Verdict:
    """The loop asks for a call the journal holds open: a fresh intent runs; one open
    before the resume runs only as recovery permitted it."""
    if call.kind == CallKind.MODEL and not _is_embedding(call):
        return _uncertain(Why.MODEL_CALL) if ev.known else Verdict(Action.RUN)
    if _is_child(call):
        return Verdict(Action.CHILD)
    if call.state != CallState.OPEN or not ev.known:
        return Verdict(Action.RUN)
    if ev.permit in _PERMITTED:
        return Verdict(_PERMITTED[ev.permit])
    return _uncertain(Why.NOT_PROVEN)
