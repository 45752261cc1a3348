"""POST /api/chat_load: import chats exported by chat_export ({chats: [json text or object]}).

Every chat is checked before any is made (python/api/_chat_json.py): one bad chat refuses
the request (400 naming its index) and nothing is made. The chats are then journaled in one
transaction, so all of them survive a restart, or none exists.
"""

from __future__ import annotations

from typing import Any

from python.api._chat_json import parse_chat
from python.server.api import ApiHandler, bad_request, get_list


class ChatLoad(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        raw_chats = get_list(input, "chats")
        if not raw_chats:
            raise bad_request("'chats' must be a non-empty list", field="chats")
        self.runtime.refresh_masker()  # the journal masks with the secrets parse_chat masks
        specs = [parse_chat(raw, index) for index, raw in enumerate(raw_chats)]
        contexts = await self.runtime.open_chats(specs)
        return {"message": "Chats loaded.", "ctxids": [ctx.id for ctx in contexts]}
