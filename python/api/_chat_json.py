"""chat.json export/import (compatibility format; the journal stays the authority)."""

from __future__ import annotations

import json
from typing import Any

LOG_ITEM_KEYS = ("type", "heading", "content", "kvps", "agentno")


def _agents(ctx: Any) -> list[Any]:
    chain: list[Any] = []
    agent = getattr(ctx, "agent0", None)
    while agent is not None and len(chain) < 50:
        chain.append(agent)
        data = getattr(agent, "data", {}) or {}
        agent = data.get("_subordinate") if isinstance(data, dict) else None
    return chain


def export_chat(ctx: Any) -> dict[str, Any]:
    created = getattr(ctx, "created_at", "")
    agents = []
    for agent in _agents(ctx):
        history = getattr(agent, "history", None)
        agents.append(
            {
                "number": getattr(agent, "number", 0),
                "history": history.to_dict() if history is not None else None,
            }
        )
    return {
        "id": ctx.id,
        "name": getattr(ctx, "name", None),
        "created_at": created.isoformat() if hasattr(created, "isoformat") else created,
        "agents": agents,
        "log": {"guid": ctx.log.guid, "items": ctx.log.output(start=0)},
    }


def parse_chat(raw: Any) -> dict[str, Any]:
    from python.helpers.api import bad_request

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


def restore_chat(runtime: Any, chat: dict[str, Any]) -> Any:
    """Create a chat from an exported one (its id when free) and refill its log and history."""
    wanted = chat.get("id") if isinstance(chat.get("id"), str) else None
    if wanted and runtime.find_context(wanted) is not None:
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
    agent0 = getattr(ctx, "agent0", None)
    if history and agent0 is not None:
        from python.helpers.history import History

        if isinstance(history, str):
            history = json.loads(history)
        agent0.history = History.from_dict(history)
    return ctx
