"""POST /api/message_async: send a message to a chat and return at once."""

from __future__ import annotations

from typing import Any

from python.api._chat import start_user_message
from python.helpers.api import ApiHandler


class MessageAsync(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx, message = await start_user_message(self.runtime, input)
        self.runtime.start_message(ctx, message)
        return {"message": "Message received.", "context": ctx.id, "message_id": message.id}
