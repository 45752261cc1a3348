"""Adopting a command that outlived the server: watch its receipt instead of holding the run.

Recovery found a shell call open whose receipt has a start marker, no exit marker, and whose
shell process still runs (``watch``): the run resumes with permit ``watch`` for it, and when
the loop reaches the call, ``watch`` waits here for the receipt instead of running the
command again or asking a person:

| the receipt becomes | what happens |
| --- | --- |
| completed (exit marker, output digest) | its output is the call's result; the run goes on |
| its shell died without an exit marker | held: uncertain_call (process_ended) |
| ``code_exec_max_timeout`` seconds pass after the start marker | held (watch_timed_out) |
| the host stops answering (SSH), or the receipt is refused | held, with that reason |

The held run is asked again later (python/durable/recheck.py): a receipt that appears after
the hold still lets the run continue by itself.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from durability.status import HoldReason, ReceiptOutcome
from durability.verdicts import Action, AdapterVerdict, Verdict, Why
from python.helpers.tool import Tool

if TYPE_CHECKING:  # pragma: no cover
    from durability.adapters.evidence import ShellEvidence
    from durability.records import Call

LOCAL_INTERVAL = 0.2  # seconds between two looks at a local receipt
REMOTE_INTERVAL = 1.0  # over SSH each look is a connection


def _held(why: Why, **detail: object) -> Verdict:
    return Verdict(Action.HOLD, HoldReason.UNCERTAIN_CALL, why, detail or None, at_call=True)


async def watch(
    evidence: ShellEvidence | None, call: Call, limit: float, tool: Tool
) -> dict[str, Any] | Verdict:
    """Wait for the call's receipt: the result to commit (``{"receipt": ...}``) once it
    proves completion, or the hold verdict once it cannot any more (``limit``: seconds
    after the start marker)."""
    if evidence is None:
        return _held(Why.NO_ADAPTER)
    remote = await asyncio.to_thread(evidence.where, call) is not None
    interval = REMOTE_INTERVAL if remote else LOCAL_INTERVAL
    tool.set_progress("[the command outlived a restart of the server: waiting for its receipt]")
    dead_seen = False
    while True:
        found: AdapterVerdict = await asyncio.to_thread(evidence.classify, call)
        detail = dict(found.detail or {})
        if found.outcome == ReceiptOutcome.COMPLETED:
            tool.set_progress("")
            return {"receipt": found.output}
        if found.outcome == ReceiptOutcome.HOST_UNREACHABLE:
            return _held(Why.HOST_UNREACHABLE, receipt_reason=found.reason)
        if found.outcome != ReceiptOutcome.UNKNOWN:  # rejected (or a start marker gone)
            return _held(Why.RECEIPT_REJECTED, receipt_reason=found.reason)
        if not detail.get("shell_alive"):
            if dead_seen:  # looked once more after it died: no exit marker came
                return _held(Why.PROCESS_ENDED, shell_pid=detail.get("shell_pid"))
            dead_seen = True  # the exit marker may land just as the shell ends: look again
        started = detail.get("started_at")
        if isinstance(started, int | float) and time.time() - started > limit:
            return _held(Why.WATCH_TIMED_OUT, limit_seconds=limit)
        await asyncio.sleep(interval)
