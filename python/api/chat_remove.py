"""POST /api/chat_remove: stop and delete a chat."""

from __future__ import annotations

from typing import Any

from python.api._chat import context_id_of
from python.server.api import ApiHandler, bad_request


class ChatRemove(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx_id = context_id_of(input, "context")
        if not ctx_id:
            raise bad_request("'context' is required")
        await self.runtime.chats.chat(ctx_id)  # 404 when unknown or purged by retention
        self.runtime.remove_context(ctx_id)
        return {"message": "Chat removed.", "ctxid": ctx_id}
