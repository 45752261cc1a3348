"""POST /api/history_get: the chat's model history as text, with a token estimate."""

from __future__ import annotations

import json
from typing import Any

from agent import AgentContext
from python.api._chat import require_context
from python.server.api import ApiHandler


def history_text(ctx: AgentContext) -> str:
    lines = []
    for message in ctx.agent0.history.output():
        content = message.get("content", "")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        lines.append(f"{message.get('role', '?')}: {content}")
    return "\n\n".join(lines)


class HistoryGet(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx = await require_context(self.runtime, input, "context")
        text = history_text(ctx)
        return {"history": text, "tokens": len(text) // 4}
