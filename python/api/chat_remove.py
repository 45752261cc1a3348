"""POST /api/chat_remove: stop and delete a chat."""

from __future__ import annotations

from typing import Any

from python.api._chat import require_context
from python.server.api import ApiHandler


class ChatRemove(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx_id = (await require_context(self.runtime, input, "context")).id
        self.runtime.remove_context(ctx_id)
        return {"message": "Chat removed.", "ctxid": ctx_id}
