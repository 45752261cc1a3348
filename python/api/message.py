"""POST /api/message: send a message to a chat and wait for the answer."""

from __future__ import annotations

from typing import Any

from python.api._chat import start_user_message
from python.helpers.api import ApiHandler


class Message(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx, message = await start_user_message(self.runtime, input)
        result = await self.runtime.run_message(ctx, message)
        return {"message": result, "context": ctx.id, "message_id": message.id}
