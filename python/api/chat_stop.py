"""POST /api/chat_stop: stop the chat's running task; the chat and its history stay."""

from __future__ import annotations

from typing import Any

from python.api._chat import require_context
from python.server.api import ApiHandler


class ChatStop(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx = await require_context(self.runtime, input, "context")
        stopped = self.runtime.cancel_chat(ctx.id)
        ctx.paused = False
        if stopped:
            ctx.log.log(type="info", heading="Stopped", content="Stopped by the user.")
        message = "Chat stopped." if stopped else "Nothing was running."
        return {"message": message, "stopped": stopped}
