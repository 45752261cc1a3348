"""POST /api/api_terminate_chat: the external API; stop and delete a chat (X-API-KEY)."""

from __future__ import annotations

from typing import Any

from python.api._chat import require_context
from python.server.api import ExternalApiHandler


class ApiTerminateChat(ExternalApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx_id = (await require_context(self.runtime, input, "context_id")).id
        self.runtime.remove_context(ctx_id)
        return {"success": True, "message": "Chat terminated.", "context_id": ctx_id}
