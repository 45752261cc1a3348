"""POST /api/chat_create: a new, empty chat."""

from __future__ import annotations

from typing import Any

from python.helpers.api import ApiHandler, get_str


class ChatCreate(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        new_id = get_str(input, "new_context")
        name = get_str(input, "name") or None
        ctx = self.runtime.create_context(new_id or None, name=name)
        return {"ok": True, "ctxid": ctx.id, "message": "Chat created."}
