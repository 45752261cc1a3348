"""chat.json export/import (compatibility format; the journal stays the authority)."""

from __future__ import annotations

import json
from typing import Any

from agent import AgentContext
from python.durable.runtime import Runtime
from python.helpers.api import bad_request
from python.helpers.history import History

LOG_ITEM_KEYS = ("type", "heading", "content", "kvps", "agentno")


def export_chat(ctx: AgentContext) -> dict[str, Any]:
    agents = [{"number": a.number, "history": a.history.to_dict()} for a in ctx.agents()]
    return {
        "id": ctx.id,
        "name": ctx.name,
        "created_at": ctx.created_at.isoformat(),
        "agents": agents,
        "log": {"guid": ctx.log.guid, "items": ctx.log.output(start=0)},
    }


def parse_chat(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise bad_request("a chat is not valid JSON") from None
    if not isinstance(raw, dict):
        raise bad_request("each chat must be a JSON object")
    log = raw.get("log", {})
    items = log.get("items", log.get("logs", [])) if isinstance(log, dict) else []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise bad_request("a chat's log items must be objects")
    return raw


def restore_chat(runtime: Runtime, chat: dict[str, Any]) -> AgentContext:
    """Create a chat from an exported one (its id when free) and refill its log and history."""
    wanted = chat.get("id") if isinstance(chat.get("id"), str) else None
    if wanted and runtime.known_context(wanted):
        wanted = None
    name = chat.get("name") if isinstance(chat.get("name"), str) else None
    ctx = runtime.create_context(wanted, name=name)
    log = chat.get("log", {})
    items: list[Any] = (log.get("items") or log.get("logs") or []) if isinstance(log, dict) else []
    for item in items:
        fields = {k: item[k] for k in LOG_ITEM_KEYS if k in item and item[k] is not None}
        fields.setdefault("type", "info")
        ctx.log.log(**fields)
    agents = chat.get("agents") or []
    first = agents[0] if agents and isinstance(agents[0], dict) else {}
    history = first.get("history")
    if history:
        if isinstance(history, str):
            history = json.loads(history)
        ctx.agent0.history = History.from_dict(ctx.mask(history))  # memory holds no secret
    return ctx
