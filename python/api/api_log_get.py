"""POST /api/api_log_get: the external API; the newest log items of a chat (X-API-KEY)."""

from __future__ import annotations

from typing import Any

from python.api._chat import require_context
from python.server.api import ExternalApiHandler, get_int


class ApiLogGet(ExternalApiHandler):
    methods = ("GET", "POST")

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx = await require_context(self.runtime, input, "context_id")
        length = get_int(input, "length", default=100, minimum=1)
        items = ctx.log.output(start=0)
        start = max(0, len(items) - length)
        return {
            "context_id": ctx.id,
            "log": {
                "guid": ctx.log.guid,
                "total_items": len(items),
                "returned_items": len(items) - start,
                "start_position": start,
                "progress": ctx.log.progress,
                "progress_active": ctx.log.progress_active,
                "items": items[start:],
            },
        }
