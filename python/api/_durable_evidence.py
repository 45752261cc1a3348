"""What the Recovery panel needs to check a held run: per call its command, its outcome and,
for an open shell call, what the receipt proves right now.

Only fields are added to the rows of ``_durable_runs.detail_row``; nothing is decided here.
The receipt is read live (``ShellReceipts.explain``): a command still running when the run
was held may have finished since, and the operator should see that before deciding.
"""

from __future__ import annotations

import asyncio
import os
from enum import StrEnum
from typing import Any

from durability.adapters.evidence import ShellEvidence
from durability.adapters.shell import SHELL_POLICY, ShellReceipts
from durability.masking import Masker
from durability.records import Call
from durability.status import CallState, ReceiptOutcome

OUTPUT_TAIL_CHARS = 4000
SHELL_TOOL = "code_execution_tool"
EVIDENCE_EVENT = "call_evidence"  # python/durable/seams.py: what an effect saw before it acted


def command_of(call: Any) -> dict[str, Any] | None:
    """The shell command of a code_execution_tool call (already masked in the journal)."""
    if call.name != SHELL_TOOL or not isinstance(call.args, dict):
        return None
    args = call.args.get("args")
    if not isinstance(args, dict):
        return None
    return {key: args[key] for key in ("runtime", "session", "code") if key in args}


class Completed(StrEnum):
    """How a completed call's result came to stand (the timeline's ``outcome``)."""

    PROVEN_BY_RECEIPT = "proven_by_receipt"  # an adapter's receipt proved it
    CONFIRMED_BY_PERSON = "confirmed_by_person"  # the confirmed_completed decision
    COMMITTED = "committed"  # the seam committed it after the effect


def outcome_of(call: Any) -> str:
    """One word for the timeline: how this call ended (or that it did not)."""
    result = call.result if isinstance(call.result, dict) else {}
    if call.state == CallState.COMPLETED:
        if "receipt" in result:
            return Completed.PROVEN_BY_RECEIPT
        if result.get("confirmed_completed"):
            return Completed.CONFIRMED_BY_PERSON
        return Completed.COMMITTED
    return str(call.state)  # open, failed, abandoned, superseded, not_completed


def _tail(text: str) -> str:
    return text if len(text) <= OUTPUT_TAIL_CHARS else "..." + text[-OUTPUT_TAIL_CHARS:]


def _read_tail(path: str) -> tuple[str, int]:
    """The last bytes of a receipt's output file (the output seen so far) and its size."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - OUTPUT_TAIL_CHARS * 4))
            data = f.read()
    except OSError:
        return "", 0
    return data.decode("utf-8", errors="replace"), size


def receipt_evidence(receipts: Any, call: Any, masker: Any) -> dict[str, Any]:
    """What the shell receipt of one open call proves, in a form the panel shows as is."""
    found = receipts.explain(call)
    detail = found.get("detail") or {}
    classification = str(found.get("classification"))
    evidence: dict[str, Any] = {
        "classification": classification.partition(":")[0],
        "started": classification != ReceiptOutcome.NOT_STARTED and "started_at" in detail,
        "started_at": detail.get("started_at"),
        "finished": classification == ReceiptOutcome.COMPLETED,
        "finished_at": detail.get("finished_at"),
        "exit_code": found.get("exit_code"),
        "shell_pid": detail.get("shell_pid"),
        "shell_alive": detail.get("shell_alive"),
        "rejected_reason": found.get("reason"),
        "host": detail.get("host"),  # set when the command ran over SSH
    }
    if classification == ReceiptOutcome.COMPLETED:
        output = str(found.get("output") or "")
        evidence["output_bytes"] = len(output.encode("utf-8"))
    elif detail.get("host") is None:
        output, evidence["output_bytes"] = _read_tail(receipts.output_path(call.id))
    else:  # the output so far stays on the host
        output, evidence["output_bytes"] = "", 0
    evidence["output_tail"] = masker.mask_text(_tail(output)) if output else ""
    return evidence


async def add_evidence(
    row: dict[str, Any],
    calls: list[Call],
    receipts: ShellReceipts | ShellEvidence | None,
    masker: Masker,
) -> dict[str, Any]:
    """``row`` (a detail row) with ``command``, ``outcome`` and ``receipt`` on each call."""
    for call, out in zip(calls, row["calls"], strict=True):
        out["command"] = command_of(call)
        out["outcome"] = outcome_of(call)
        out["receipt"] = None
        if call.policy == SHELL_POLICY and call.state == CallState.OPEN and receipts is not None:
            out["receipt"] = await asyncio.to_thread(receipt_evidence, receipts, call, masker)
    return row


def call_evidence(events: list[Any]) -> dict[str, dict[str, Any]]:
    """call id -> what its tool saw just before it acted (the latest, for a call run again):
    the browser's page (URL, title) and the screenshot's hash, journaled by the seam."""
    found: dict[str, dict[str, Any]] = {}
    for event in events:
        payload = event.payload if isinstance(event.payload, dict) else {}
        if event.type == EVIDENCE_EVENT and isinstance(payload.get("call_id"), str):
            found[payload["call_id"]] = {k: v for k, v in payload.items() if k != "call_id"}
    return found


def add_call_evidence(row: dict[str, Any], events: list[Any]) -> dict[str, Any]:
    """``evidence`` on each call of ``row``: None, or what its tool saw before it acted, with
    the URL of its screenshot (GET /api/browser_screenshot)."""
    found = call_evidence(events)
    for out in row["calls"]:
        evidence = found.get(out["call_id"])
        if evidence is not None and evidence.get("screenshot"):
            query = f"run_id={row['run_id']}&call_id={out['call_id']}"
            evidence = {**evidence, "screenshot_url": f"/api/browser_screenshot?{query}"}
        out["evidence"] = evidence
    return row
