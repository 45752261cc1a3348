"""POST /api/durable_recheck: ask the evidence of held runs again (the Recovery panel's
refresh); a run whose receipt now proves the outcome is re-classified and continues."""

from __future__ import annotations

from typing import Any

from python.durable.recheck import recheck
from python.server.api import ApiHandler, get_str


class DurableRecheck(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        run_id = get_str(input, "run_id") or None
        if run_id is not None:
            await self.runtime.journal.aio.get_run(run_id)  # run_not_found (404)
        return {"changes": await recheck(self.runtime.chats, run_id)}
