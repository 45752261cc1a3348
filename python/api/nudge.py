"""POST /api/nudge: kick a stuck agent (restart its current step)."""

from __future__ import annotations

import asyncio
from typing import Any

from python.api._chat import require_context
from python.helpers.api import ApiHandler


class Nudge(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx = await require_context(self.runtime, input, "ctxid", "context")
        result = ctx.nudge()
        if asyncio.iscoroutine(result):
            result = await result
        if isinstance(result, asyncio.Task):
            self.runtime.track_task(ctx.id, result)
        return {"message": "Agent nudged.", "ctxid": ctx.id}
