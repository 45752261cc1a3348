"""POST /api/chat_reset: stop the chat and clear its history and log."""

from __future__ import annotations

from typing import Any

from python.api._chat import require_context
from python.server.api import ApiHandler


class ChatReset(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx = await require_context(self.runtime, input, "context")
        ctx.reset()  # stops the run first
        return {"message": "Agent restarted.", "ctxid": ctx.id}
