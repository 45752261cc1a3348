"""POST /api/nudge: kick a stuck agent (restart its current step)."""

from __future__ import annotations

from typing import Any

from python.api._chat import require_context
from python.server.api import ApiHandler


class Nudge(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx = await require_context(self.runtime, input, "ctxid", "context")
        ctx.nudge()
        return {"message": "Agent nudged.", "ctxid": ctx.id}
