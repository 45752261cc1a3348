"""Held runs whose evidence may have changed: asked again, re-classified when it did.

A run held because its shell call's receipt could not prove the outcome (the SSH host did
not answer, the command was still running past its limit, its shell died without an exit
marker) is asked again: on the Recovery panel's refresh (``POST /api/durable_recheck``) and
every ``recovery_recheck_seconds`` (the loop started with the server). When the receipt now
proves something, the journal re-classifies the run (``Journal.reclassify``: an
``evidence_changed`` event says what changed), the chat says so, and the run continues:

| the receipt now says | the call | the run |
| --- | --- | --- |
| completed (exit marker, digest) | committed with the receipt's output | resumes, reusing it |
| never started | closed ``not_completed`` | resumes, running it for the first time |
| still running (a host that answers again) | left open | resumes and watches it (adoption) |
| anything else (unreachable, unknown, rejected) | unchanged | stays held; nothing is guessed |
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from durability.errors import DurabilityError
from durability.records import Run
from durability.status import CallState, HoldReason, Permit, Policy, ReceiptOutcome, RunStatus
from durability.verdicts import AdapterVerdict, Why
from python.durable.session import session_of

if TYPE_CHECKING:  # pragma: no cover
    from python.durable.chats import DurableChats

logger = logging.getLogger("a0.durable")

#: The holds whose evidence can change by itself (a receipt that appears, a host that answers).
RECHECKED = (
    Why.HOST_UNREACHABLE,
    Why.RECEIPT_UNKNOWN,
    Why.PROCESS_ENDED,
    Why.WATCH_TIMED_OUT,
    Why.DELIVERY_UNKNOWN,
)
DEFAULT_INTERVAL = 30.0
BEFORE: dict[str, str] = {
    Why.HOST_UNREACHABLE: "the SSH host did not answer",
    Why.RECEIPT_UNKNOWN: "the receipt had a start marker but no exit marker",
    Why.PROCESS_ENDED: "the shell had ended without an exit marker",
    Why.WATCH_TIMED_OUT: "the command was still running past its time limit",
    Why.DELIVERY_UNKNOWN: "the terminal had taken the input but not confirmed its delivery",
}
CHANGED = "Evidence changed"


def _held_call_id(run: Run) -> str | None:
    detail = run.reason_detail if isinstance(run.reason_detail, dict) else {}
    if run.status != RunStatus.NEEDS_ATTENTION or run.reason != HoldReason.UNCERTAIN_CALL:
        return None
    call_id = detail.get("call_id")
    return call_id if detail.get("why") in RECHECKED and isinstance(call_id, str) else None


def describe(before: str, found: AdapterVerdict) -> str:
    """What changed, in one sentence for the panel and the chat."""
    was = BEFORE.get(before, str(before))
    if found.outcome == ReceiptOutcome.COMPLETED and (found.detail or {}).get("delivered"):
        now = "its delivery marker now proves the input reached the program"
    elif found.outcome == ReceiptOutcome.COMPLETED:
        output = found.output if isinstance(found.output, dict) else {}
        now = f"its receipt now proves completion (exit code {output.get('exit_code')})"
    elif found.outcome == ReceiptOutcome.NOT_STARTED:
        now = "its receipt now proves the command never started"
    else:
        now = "the host answers again and the command is still running: it is watched"
    return f"Held because {was}; {now}. The run continues."


def _outcome(before: str, found: AdapterVerdict) -> str | None:
    if found.outcome == ReceiptOutcome.COMPLETED:
        return "completed"
    if found.outcome == ReceiptOutcome.NOT_STARTED:
        return "not_started"
    alive = bool((found.detail or {}).get("shell_alive"))
    if found.outcome == ReceiptOutcome.UNKNOWN and alive and before == Why.HOST_UNREACHABLE:
        return "watch"
    return None


async def recheck_run(chats: DurableChats, run: Run) -> dict[str, Any] | None:
    """Ask a held run's evidence again; what was found (None: not a hold evidence can lift)."""
    call_id = _held_call_id(run)
    evidence = chats.evidence
    if call_id is None or evidence is None:
        return None
    journal = chats.journal
    call = await journal.aio.get_call(call_id)
    if call.state != CallState.OPEN or call.policy not in (Policy.SHELL, Policy.PTY):
        return None
    before = str((run.reason_detail or {}).get("why"))
    found: AdapterVerdict = await asyncio.to_thread(evidence.classify, call)
    report: dict[str, Any] = {
        "run_id": run.id,
        "call_id": call_id,
        "before": before,
        "evidence": str(found.outcome),
        "reason": found.reason,
        "changed": False,
    }
    outcome = _outcome(before, found)
    if outcome is None:
        return report
    text = describe(before, found)
    result = {"receipt": found.output} if outcome == "completed" else None
    change = {"before": before, "text": text}
    try:
        await journal.aio.reclassify(
            run.id,
            version=run.version,
            call_id=call_id,
            outcome=outcome,
            result=result,
            change=change,
        )
    except DurabilityError as exc:  # someone decided first, or the run moved on
        report["error"] = exc.code
        return report
    report.update(changed=True, outcome=outcome, text=text)
    context = await chats.load(run.context_id)
    if context is not None:
        context.log.log(type="info", heading=CHANGED, content=text, kvps={"run_id": run.id})
        session = session_of(context)
        permits = {call_id: Permit.WATCH} if outcome == "watch" else {}
        if not session.is_running() and await chats.ownership.take(run.id):
            session.resume(run.id, permits)
    return report


async def recheck(chats: DurableChats, run_id: str | None = None) -> list[dict[str, Any]]:
    """Ask again every held run (or ``run_id``) whose hold evidence could lift."""
    journal = chats.journal
    if run_id is not None:
        runs = [await journal.aio.get_run(run_id)]
    else:
        runs = await journal.aio.list_runs(RunStatus.NEEDS_ATTENTION, limit=1000)
    reports = []
    for run in runs:
        try:
            report = await recheck_run(chats, run)
        except Exception as exc:  # one run's failure never stops the others
            logger.warning("recheck of run %s failed: %s", run.id, type(exc).__name__)
            continue
        if report is not None:
            reports.append(report)
    return reports


async def recheck_forever(chats: DurableChats, interval: float) -> None:
    """The periodic check (started with the server, cancelled when the chats close)."""
    while not chats.stopping:
        await asyncio.sleep(interval)
        try:
            for report in await recheck(chats):
                if report.get("changed"):
                    logger.info("run %s re-classified: %s", report["run_id"], report["text"])
        except Exception as exc:
            logger.warning("periodic recheck failed: %s", type(exc).__name__)
