"""POST /api/api_terminate_chat: the external API; stop and delete a chat (X-API-KEY)."""

from __future__ import annotations

from typing import Any

from python.api._chat import context_id_of
from python.server.api import ApiHandler, bad_request


class ApiTerminateChat(ApiHandler):
    requires_auth = False
    requires_csrf = False
    requires_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx_id = context_id_of(input, "context_id")
        if not ctx_id:
            raise bad_request("'context_id' is required")
        await self.runtime.chats.chat(ctx_id)  # 404 when unknown or purged by retention
        self.runtime.remove_context(ctx_id)
        return {"success": True, "message": "Chat terminated.", "context_id": ctx_id}
