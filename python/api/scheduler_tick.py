"""POST /api/scheduler_tick: look at every task now and fire what is due (loopback only)."""

from __future__ import annotations

from typing import Any

from python.api._scheduler import scheduler_of
from python.server.api import ApiHandler


class SchedulerTick(ApiHandler):
    requires_auth = False
    requires_csrf = False
    requires_loopback = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        scheduler = scheduler_of(self.runtime)
        firings, _ = await scheduler.tick()
        return {"ok": True, "firings": [f.to_dict() for f in firings]}
