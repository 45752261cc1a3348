"""Shared pieces of the durable_* run endpoints: rows for runs and calls, the actor."""

from __future__ import annotations

import json
from typing import Any

from durability import integrity
from durability.decision_fit import fitting
from durability.records import RESULT_STATES, RUN_STATUSES, TERMINAL_RUN_STATUSES, fields_of
from durability.status import CallState
from python.server.api import bad_request, get_str

PREVIEW_CHARS = 2000


def require_run_id(input: dict[str, Any]) -> str:
    return get_str(input, "run_id", required=True)


def actor_of(request: Any, runtime: Any) -> str:
    """Who decides: the API key holder, the logged-in user, or the local UI user."""
    if request.headers.get("x-api-key"):
        return "api"
    login = runtime.auth.login
    return f"user:{login}" if login else "user:ui"


def phase_of(status: str, calls: list[Any]) -> str:
    """Where the run stands: admitted, intent_open (an effect may be uncertain),
    result_committed (between calls) or ended."""
    if status in TERMINAL_RUN_STATUSES:
        return "ended"
    if not calls:
        return "admitted"
    if any(c.state == CallState.OPEN for c in calls):
        return "intent_open"
    return "result_committed"


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "..."


def call_row(call: Any) -> dict[str, Any]:
    """One journaled call as the API shows it (arguments are stored masked)."""
    return {
        **fields_of(call, "call_id=id", "seq", "agent_no", "attempt", "kind", "name"),
        "status": call.state,
        "committed": call.state in RESULT_STATES,
        "replay_policy": call.policy,
        "args": _preview(call.args),
        "result": None if call.result is None else _preview(call.result),
        "created_at": call.created_at,
        "closed_at": call.closed_at,
        "damaged": damage_of(call),
    }


def damage_of(call: Any) -> str | None:
    """``record:reason`` for each damaged part of the call (never used; see integrity.py)."""
    found = integrity.call_damages(call)
    return ", ".join(f"{d.record}:{d.reason}" for d in found) or None


def run_row(run: Any, calls: list[Any] | None = None) -> dict[str, Any]:
    row = {
        "run_id": run.id,
        "context_id": run.context_id,
        "input_id": run.input_id,
        "status": run.status,
        "version": run.version,
        "reason": run.reason,
        "reason_detail": run.reason_detail,
        "recovery_attempts": run.recovery_attempts,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
    }
    if calls is not None:
        row["phase"] = phase_of(run.status, calls)
    return row


def detail_row(detail: Any) -> dict[str, Any]:
    """A run with its calls and decisions (``journal.read_run``), and which decisions fit
    it now and why the others do not (durability/decision_fit.py)."""
    row = run_row(detail.run, detail.calls)
    row["calls"] = [call_row(c) for c in detail.calls]
    row["decisions_available"] = [f.to_dict() for f in fitting(detail.run, detail.calls)]
    row["decisions"] = [
        {
            "decision": d.decision,
            "version": d.version,
            "actor": d.actor,
            "note": d.note,
            "call_id": d.call_id,
            "created_at": d.created_at,
        }
        for d in detail.decisions
    ]
    return row


def add_chat_name(row: dict[str, Any], runtime: Any) -> dict[str, Any]:
    """``context_name``: the chat's name as the chat list shows it (None when the chat is
    not loaded in this process), so the Recovery panel names the chat, not its id."""
    context_id = row.get("context_id")
    ctx = runtime.find_context(context_id) if context_id else None
    name = getattr(ctx, "name", None) if ctx is not None else None
    no = getattr(ctx, "no", None) if ctx is not None else None
    if ctx is None and context_id:  # a chat not rebuilt since start-up: its listed name
        idle = runtime.chats.idle_chat(context_id)
        name = idle.name if idle is not None else None
    row["context_name"] = name or (f"Chat {no}" if no is not None else None)
    return row


def require_status(input: dict[str, Any]) -> str | None:
    status = get_str(input, "status") or None
    if status is not None and status not in RUN_STATUSES:
        raise bad_request(f"'status' must be one of {', '.join(RUN_STATUSES)}")
    return status


async def add_standing_uses(row: dict[str, Any], journal: Any) -> dict[str, Any]:
    """``standing_grant_uses``: each retry a standing grant paid for in this run, with the
    grant's scope, author and note."""
    uses = await journal.aio.standing_grant_uses(row["run_id"])
    row["standing_grant_uses"] = [
        {
            "grant_id": use.grant_id,
            "call_id": use.call_id,
            "created_at": use.created_at,
            **(standing_row(grant) if grant is not None else {}),
        }
        for use, grant in uses
    ]
    return row


def standing_row(grant: Any) -> dict[str, Any]:
    return fields_of(
        grant, "grant_id=id", "scope", "target", "attempts", "actor", "note", "created_at"
    )
