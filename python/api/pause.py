"""POST /api/pause: pause or resume a chat's agent."""

from __future__ import annotations

from typing import Any

from python.api._chat import require_context
from python.server.api import ApiHandler, get_bool


class Pause(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        paused = get_bool(input, "paused", default=True)
        ctx = await require_context(self.runtime, input, "context")
        ctx.paused = paused
        return {"message": "Agent paused." if paused else "Agent unpaused.", "pause": paused}
