"""POST /api/chat_create: a new, empty chat, journaled so that it survives a restart."""

from __future__ import annotations

from typing import Any

from python.api._chat_json import check_chat_id
from python.durable.new_chats import ChatSpec
from python.server.api import ApiHandler, get_str


class ChatCreate(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        new_id = check_chat_id(get_str(input, "new_context"), "new_context")
        name = get_str(input, "name") or None
        spec = ChatSpec("created", id=new_id, name=name, keep_id=True)
        (ctx,) = await self.runtime.open_chats([spec])
        return {"ok": True, "ctxid": ctx.id, "message": "Chat created."}
