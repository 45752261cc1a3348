"""POST /api/poll: the UI snapshot (chat list, new log items of the selected chat, state)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from agent import AgentContext, AgentContextType
from durability import Journal
from durability.status import RunStatus
from python.api._chat import context_id_of
from python.durable.idle import IdleChat
from python.server.api import ApiHandler, get_int


def _log_snapshot(ctx: AgentContext, log_from: int) -> dict[str, Any]:
    log = ctx.log
    return {
        "logs": log.output(start=log_from),
        "log_guid": log.guid,
        "log_version": log.version,
        "log_progress": log.progress if ctx.is_running() else "",
        # an idle chat has no step in progress (its last heading is no longer current)
        "log_progress_active": log.progress_active and ctx.is_running(),
        "paused": ctx.paused,
    }


def idle_row(context_id: str, idle: IdleChat) -> dict[str, Any]:
    """The chat list's row of a chat not rebuilt since start-up (the same keys as a loaded
    chat's ``output()``); the first request that names it rebuilds it."""
    created = datetime.fromtimestamp(idle.created_at, UTC).isoformat()
    return {
        "id": context_id,
        "name": idle.name,
        "created_at": created,
        "no": None,
        "log_guid": "",
        "log_version": 0,
        "log_length": idle.log_length,
        "paused": False,
        "last_message": created,
        "type": AgentContextType.USER.value,
        "running": False,
    }


def _held_state(
    journal: Journal, ctx_id: str | None
) -> tuple[dict[str, Any] | None, int, dict[str, str]]:
    """The selected chat's held run (if any), how many runs wait for a decision, and the
    reason each held chat waits for (by chat id: the chat list marks them)."""
    held = journal.list_runs(RunStatus.NEEDS_ATTENTION, limit=1000)
    mine = next((r for r in held if r.context_id == ctx_id), None) if ctx_id else None
    row = None
    if mine is not None:
        row = {"run_id": mine.id, "reason": mine.reason, "version": mine.version}
    return row, len(held), {r.context_id: str(r.reason or "") for r in held}


def model_problem() -> dict[str, Any] | None:
    """The first thing that stops the chat or utility model as configured (no key, unknown
    provider, no or malformed base URL, no name), read from the settings only: the page
    says so at the top before anything is sent (python/helpers/model_preflight.py)."""
    from python.helpers import model_preflight
    from python.helpers import settings as settings_mod
    from python.helpers.agent_config import AgentConfig

    config = AgentConfig.from_settings(settings_mod.load())
    for kind in ("chat", "utility"):
        model = config.model_config(kind)
        has_key = bool(settings_mod.get_api_key(model.provider))
        found = model_preflight.problem(model, has_key, kind)
        if found is not None:
            return found.to_dict()
    return None


class Poll(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx_id = context_id_of(input, "context")
        log_from = get_int(input, "log_from", default=0, minimum=0)
        notes_from = get_int(input, "notifications_from", default=0, minimum=0)
        runtime = self.runtime
        await runtime.forget_purged_chats()  # retention may have removed chats meanwhile
        contexts = []
        for chat in runtime.user_contexts():
            row = dict(chat.output())
            row["running"] = chat.is_running()
            contexts.append(row)
        contexts += [idle_row(context_id, idle) for context_id, idle in runtime.chats.idle()]
        contexts.sort(key=lambda r: str(r.get("created_at", "")), reverse=True)
        snapshot: dict[str, Any] = {
            "deselect_chat": False,
            "context": None,
            "contexts": contexts,
            "tasks": [],
            "logs": [],
            "log_guid": "",
            "log_version": 0,
            "log_progress": "",
            "log_progress_active": False,
            "paused": False,
            "running": False,
            "notifications": runtime.notifications.output(notes_from),
            "notifications_guid": runtime.notifications.guid,
            "notifications_version": runtime.notifications.version,
            "held_run": None,  # this fork: the selected chat's run waiting for a decision
            "held_runs": 0,  # this fork: runs waiting for a decision (the Recovery badge)
        }
        ctx = await runtime.shared_chat(ctx_id) if ctx_id else None
        if ctx_id and ctx is None:
            snapshot["deselect_chat"] = True  # a removed chat is never recreated by polling
        elif ctx is not None:
            snapshot.update(_log_snapshot(ctx, log_from))
            snapshot["context"] = ctx.id
            snapshot["running"] = ctx.is_running()
        selected = ctx.id if ctx is not None else None
        held, count, reasons = await asyncio.to_thread(_held_state, runtime.journal, selected)
        snapshot["model_problem"] = await asyncio.to_thread(model_problem)  # this fork
        snapshot["held_run"], snapshot["held_runs"] = held, count
        for row in contexts:  # this fork: a chat whose run waits for a decision
            row["held"] = row["id"] in reasons
            row["held_reason"] = reasons.get(row["id"])
        return snapshot
