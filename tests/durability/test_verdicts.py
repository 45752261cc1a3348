"""DESIGN.md section 5 as a table: one row per rule of ``durability.verdicts.judge``.

Each row names the DESIGN row or edge rule it stands for; where the code keeps a choice
that differs from DESIGN's wording, the row says so (``code:``).
"""

from __future__ import annotations

from typing import Any

import pytest

from durability.records import Call
from durability.status import CallKind, CallState, HoldReason, Permit, Policy, ReceiptOutcome
from durability.verdicts import Action, AdapterVerdict, Evidence, Verdict, Why, judge, to_verdict

pytestmark = pytest.mark.unit

HOLD = Action.HOLD
UNCERTAIN = HoldReason.UNCERTAIN_CALL
REC = {"recovering": True, "known": True}  # start-up or takeover judges an open call


def call(
    kind: str = CallKind.TOOL,
    policy: str = Policy.HOLD,
    state: str = CallState.OPEN,
    result: Any = None,
) -> Call:
    return Call(
        id="c1",
        run_id="r1",
        agent_no=0,
        seq=3,
        attempt=1,
        kind=kind,
        name="model" if kind == CallKind.MODEL else "tool_x",
        args={},
        policy=policy,
        fingerprint="f" * 64,
        state=state,
        result=result,
        result_digest=None,
        created_at=0.0,
        closed_at=None,
    )


MODEL = {"kind": CallKind.MODEL}
SHELL = {"policy": Policy.SHELL}
PTY = {"policy": Policy.PTY}
CHILD = {"kind": CallKind.SUBORDINATE, "policy": Policy.CHILD}
DONE = {"state": CallState.COMPLETED}
FAILED = {"state": CallState.FAILED}
DAMAGE = {"record": "call", "reason": "digest_mismatch"}


def receipt(outcome: str, **kw: Any) -> AdapterVerdict:
    return AdapterVerdict(outcome, **kw)


# (row, call fields or None for the run, evidence, action, hold reason, why)
ROWS: list[tuple[str, dict[str, Any] | None, dict[str, Any], Action, str | None, str | None]] = [
    # the run as a whole
    ("edge: a held run is never re-queued", None, {"held": True}, Action.SKIP, None, None),
    (
        "checkpoint corrupt: held, nothing repaired",
        None,
        {"checkpoint_damage": {"code": "corrupt_checkpoint"}},
        HOLD,
        HoldReason.CORRUPT_CHECKPOINT,
        None,
    ),
    ("damaged record", None, {"record_damage": DAMAGE}, HOLD, HoldReason.CORRUPT_RECORD, None),
    (
        "edge: recovery keeps failing: parked",
        None,
        {"stalled": {"attempts": 3, "progress": 0}},
        HOLD,
        HoldReason.RECOVERY_ATTEMPTS_EXCEEDED,
        None,
    ),
    (
        "edge: replay divergence (another fingerprint at the seq)",
        None,
        {"divergence": {"seq": 3}},
        HOLD,
        HoldReason.REPLAY_DIVERGENCE,
        None,
    ),
    ("no open intent: resumable", None, {}, Action.RESUME, None, None),
    (
        "a held run stays held even with damage found",
        None,
        {"held": True, "record_damage": DAMAGE},
        Action.SKIP,
        None,
        None,
    ),
    (
        "corrupt checkpoint outranks a damaged call",
        None,
        {"checkpoint_damage": {}, "record_damage": DAMAGE},
        HOLD,
        HoldReason.CORRUPT_CHECKPOINT,
        None,
    ),
    # committed results: reuse, nothing runs again
    ("committed tool result: reuse", DONE, {}, Action.REUSE, None, None),
    (
        "committed model reply: reuse",
        {**MODEL, **DONE, "result": {"response": "hi"}},
        {},
        Action.REUSE,
        None,
        None,
    ),
    (
        "committed model call confirmed by a person (no reply): ask at the next position",
        {**MODEL, **DONE, "result": {"confirmed_completed": True, "note": "n"}},
        {},
        Action.NEXT,
        None,
        None,
    ),
    (
        "edge: a result cut by an intervention is never reused",
        {**DONE, "result": {"interrupted": True}},
        {},
        HOLD,
        HoldReason.REPLAY_DIVERGENCE,
        Why.INTERRUPTED,
    ),
    (
        "completed child workflow: resumes inside the run",
        {**CHILD, **DONE},
        {},
        Action.CHILD,
        None,
        None,
    ),
    (
        "edge: a child workflow that answers otherwise diverged",
        {**CHILD, **DONE},
        {"child_answer_differs": True},
        HOLD,
        HoldReason.REPLAY_DIVERGENCE,
        Why.CHILD_RESULT,
    ),
    ("abandoned by a decision", {"state": CallState.ABANDONED}, {}, Action.ABANDONED, None, None),
    # committed failures
    ("committed tool failure: raised again", FAILED, {}, Action.FAIL, None, None),
    (
        "repairable model failure: raised again",
        {**MODEL, **FAILED, "result": {"error": "repairable"}},
        {},
        Action.FAIL,
        None,
        None,
    ),
    (
        "utility model failure: raised again (the loop copes)",
        {**MODEL, **FAILED, "result": {"error": "model_error"}},
        {"utility": True},
        Action.FAIL,
        None,
        None,
    ),
    (
        "failed model call: a retry grant is asked for first",
        {**MODEL, **FAILED, "result": {"error": "model_error"}},
        {},
        Action.ASK_GRANT,
        None,
        None,
    ),
    (
        "failed model call, a retry grant used: retry",
        {**MODEL, **FAILED, "result": {"error": "model_error"}},
        {"grant": True},
        Action.RETRY,
        None,
        None,
    ),
    (
        "failed model call, no grant: held",
        {**MODEL, **FAILED, "result": {"error": "model_error"}},
        {"grant": False},
        HOLD,
        HoldReason.MODEL_FAILED,
        None,
    ),
    # open intents at start-up or takeover
    (
        "open model call at recovery, no standing grant: held",
        MODEL,
        REC,
        HOLD,
        UNCERTAIN,
        Why.MODEL_CALL_OUTCOME_UNKNOWN,
    ),
    (
        "open model call at recovery, a standing grant pays: retried (#23)",
        MODEL,
        {**REC, "grant": True},
        Action.RETRY,
        None,
        None,
    ),
    ("open child workflow, pinned: resumes", CHILD, REC, Action.CHILD, None, None),
    (
        "open subordinate not pinned: held",
        {"kind": CallKind.SUBORDINATE},
        REC,
        HOLD,
        UNCERTAIN,
        Why.CHILD_NOT_PINNED,
    ),
    (
        "safe-replay tool, pin matches: replay",
        {"policy": Policy.SAFE_REPLAY},
        {**REC, "pinned": True},
        Action.REPLAY,
        None,
        None,
    ),
    (
        "safe-replay tool, pin changed: held",
        {"policy": Policy.SAFE_REPLAY},
        REC,
        HOLD,
        UNCERTAIN,
        Why.PIN_MISMATCH,
    ),
    (
        "receipt proves completed: use it",
        SHELL,
        {**REC, "receipt": receipt(ReceiptOutcome.COMPLETED, output={"message": "ok"})},
        Action.RECEIPT,
        None,
        None,
    ),
    (
        "receipt proves never started: run it",
        SHELL,
        {**REC, "receipt": receipt(ReceiptOutcome.NOT_STARTED)},
        Action.RUN,
        None,
        None,
    ),
    (
        "journal_atomic: no result means no effect, run again, never hold",
        {"policy": Policy.JOURNAL_ATOMIC},
        REC,
        Action.RUN,
        None,
        None,
    ),
    (
        "the adapter's process is still alive: watch it",
        SHELL,
        {**REC, "receipt": receipt(ReceiptOutcome.UNKNOWN), "process_alive": True},
        Action.WATCH,
        None,
        None,
    ),
    (
        "receipt unknown (start without exit): held",
        SHELL,
        {**REC, "receipt": receipt(ReceiptOutcome.UNKNOWN)},
        HOLD,
        UNCERTAIN,
        Why.RECEIPT_UNKNOWN,
    ),
    (
        "the SSH host holding the receipt does not answer: held, asked again later",
        SHELL,
        {**REC, "receipt": receipt(ReceiptOutcome.HOST_UNREACHABLE, reason="ssh_connect_failed")},
        HOLD,
        UNCERTAIN,
        Why.HOST_UNREACHABLE,
    ),
    (
        "a shared worker cannot read another worker's local receipt: held",
        SHELL,
        {**REC, "receipt": receipt(ReceiptOutcome.REJECTED, reason="local_receipt_elsewhere")},
        HOLD,
        UNCERTAIN,
        Why.LOCAL_RECEIPT_ELSEWHERE,
    ),
    (
        "an input's delivery marker matches: delivered, its receipt is the result",
        PTY,
        {**REC, "receipt": receipt(ReceiptOutcome.COMPLETED, output={"message": "delivered"})},
        Action.RECEIPT,
        None,
        None,
    ),
    (
        "an input never handed over (or voided unclaimed): not delivered, deliver it",
        PTY,
        {**REC, "receipt": receipt(ReceiptOutcome.NOT_STARTED)},
        Action.RUN,
        None,
        None,
    ),
    (
        "an input claimed by its terminal without a marker: held (delivery_unknown)",
        PTY,
        {**REC, "receipt": receipt(ReceiptOutcome.UNKNOWN, reason="delivery_unknown")},
        HOLD,
        UNCERTAIN,
        Why.DELIVERY_UNKNOWN,
    ),
    (
        "an input claimed without a marker is never watched, whatever process runs",
        PTY,
        {
            **REC,
            "receipt": receipt(ReceiptOutcome.UNKNOWN, reason="delivery_unknown"),
            "process_alive": True,
        },
        HOLD,
        UNCERTAIN,
        Why.DELIVERY_UNKNOWN,
    ),
    (
        "an input with no adapter registered: held",
        PTY,
        {**REC},
        HOLD,
        UNCERTAIN,
        Why.NO_ADAPTER,
    ),
    (
        "edge: a rejected receipt proves nothing: held",
        SHELL,
        {**REC, "receipt": receipt(ReceiptOutcome.REJECTED, reason="digest_mismatch")},
        HOLD,
        UNCERTAIN,
        Why.RECEIPT_REJECTED,
    ),
    (
        "an adapter policy with no adapter (a takeover): held",
        SHELL,
        REC,
        HOLD,
        UNCERTAIN,
        Why.NO_ADAPTER,
    ),
    ("anything else: held", {}, REC, HOLD, UNCERTAIN, Why.NO_REPLAY_POLICY),
    # the loop asks for a call the journal holds open
    ("a fresh intent runs", {}, {"permit": ""}, Action.RUN, None, None),
    ("a fresh model intent runs", MODEL, {"permit": ""}, Action.RUN, None, None),
    (
        "a model call open before the resume: held",
        MODEL,
        {"known": True, "permit": ""},
        HOLD,
        UNCERTAIN,
        Why.MODEL_CALL,
    ),
    (
        "recovery found its shell still running: the loop watches it (adoption)",
        SHELL,
        {"known": True, "permit": Permit.WATCH},
        Action.WATCH,
        None,
        None,
    ),
    (
        "recovery permitted a replay",
        {},
        {"known": True, "permit": Permit.REPLAY},
        Action.REPLAY,
        None,
        None,
    ),
    (
        "recovery proved it never started",
        SHELL,
        {"known": True, "permit": Permit.RUN},
        Action.RUN,
        None,
        None,
    ),
    (
        "an open child workflow resumes",
        CHILD,
        {"known": True, "permit": ""},
        Action.CHILD,
        None,
        None,
    ),
    (
        "an open call recovery did not permit: held",
        SHELL,
        {"known": True, "permit": ""},
        HOLD,
        UNCERTAIN,
        Why.NOT_PROVEN,
    ),
]


@pytest.mark.parametrize(
    ("fields", "evidence", "action", "reason", "why"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_verdict_table(
    fields: dict[str, Any] | None,
    evidence: dict[str, Any],
    action: Action,
    reason: str | None,
    why: str | None,
) -> None:
    verdict = judge(None if fields is None else call(**fields), Evidence(**evidence))
    assert (verdict.action, verdict.reason, verdict.why) == (action, reason, why)


def test_run_level_hold_records_its_evidence() -> None:
    verdict = judge(None, Evidence(record_damage=DAMAGE))
    assert verdict.hold_detail({"call_id": "ignored"}) == DAMAGE


def test_call_level_hold_names_the_position() -> None:
    found = Evidence(**REC, receipt=receipt(ReceiptOutcome.REJECTED, reason="bad_marker"))
    verdict = judge(call(**SHELL), found)
    detail = verdict.hold_detail({"call_id": "c1", "seq": 3})
    assert detail == {
        "call_id": "c1",
        "seq": 3,
        "why": "receipt_rejected",
        "receipt_reason": "bad_marker",
    }


def test_model_failed_hold_records_the_error() -> None:
    error = {"error": "model_error", "status": 500, "message": "boom"}
    verdict = judge(call(**MODEL, **FAILED, result=error), Evidence(grant=False))
    assert verdict.hold_detail({"call_id": "c1"}) == {"call_id": "c1", "error": error}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("completed", AdapterVerdict("completed")),
        (("completed", {"x": 1}), AdapterVerdict("completed", output={"x": 1})),
        ("not_started", AdapterVerdict("not_started")),
        ("unknown", AdapterVerdict("unknown")),
        ("rejected:digest", AdapterVerdict("rejected", reason="digest")),
        ("rejected", AdapterVerdict("rejected", reason="rejected")),
        (
            "host_unreachable:ssh_auth_failed",
            AdapterVerdict("host_unreachable", reason="ssh_auth_failed"),
        ),
        ("nonsense", AdapterVerdict("rejected", reason="malformed_verdict")),
        (42, AdapterVerdict("rejected", reason="malformed_verdict")),
    ],
)
def test_adapter_answers_normalised(answer: Any, expected: AdapterVerdict) -> None:
    assert to_verdict(answer) == expected


def test_verdicts_are_values() -> None:
    assert judge(None, Evidence()) == Verdict(Action.RESUME)
