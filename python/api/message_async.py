"""POST /api/message_async: send a message to a chat and return at once."""

from __future__ import annotations

from typing import Any

from python.api._chat import admit_user_message
from python.server.api import ApiHandler


class MessageAsync(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        _chat, message, admitted = await admit_user_message(self.runtime, input)
        return {
            "message": "Message received.",
            "context": admitted.context_id,
            "message_id": message.id,
            "run_id": admitted.run_id,
            "kind": admitted.kind,
            "status": admitted.status,
        }
