"""GET /api/health: liveness, no login needed."""

from __future__ import annotations

import time
from typing import Any

from python.server.api import ApiHandler


class Health(ApiHandler):
    requires_auth = False
    requires_csrf = False
    methods = ("GET", "POST")

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        return {
            "ok": True,
            "runtime_id": self.runtime.runtime_id,
            "uptime_seconds": round(time.time() - self.runtime.started_at, 3),
        }
