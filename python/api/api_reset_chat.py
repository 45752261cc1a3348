"""POST /api/api_reset_chat: the external API; clear a chat's history (X-API-KEY)."""

from __future__ import annotations

from typing import Any

from python.api._chat import require_context
from python.server.api import ExternalApiHandler


class ApiResetChat(ExternalApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx = await require_context(self.runtime, input, "context_id")
        ctx.reset()  # stops the run first
        return {"success": True, "message": "Chat reset.", "context_id": ctx.id}
