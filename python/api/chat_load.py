"""POST /api/chat_load: import chats exported by chat_export ({chats: [json text or object]})."""

from __future__ import annotations

from typing import Any

from python.api._chat_json import parse_chat, restore_chat
from python.helpers.api import ApiHandler, bad_request, get_list


class ChatLoad(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        raw_chats = get_list(input, "chats")
        if not raw_chats:
            raise bad_request("'chats' must be a non-empty list")
        chats = [parse_chat(raw) for raw in raw_chats]  # validate all before creating any
        ctxids = [restore_chat(self.runtime, chat).id for chat in chats]
        return {"message": "Chats loaded.", "ctxids": ctxids}
