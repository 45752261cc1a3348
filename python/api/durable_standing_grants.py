"""POST /api/durable_standing_grants: the standing retry grants, newest first (the newest of a
scope and target is the one in force), each marked ``in_force``."""

from __future__ import annotations

from typing import Any

from python.api._durable_runs import standing_row
from python.server.api import ApiHandler, get_int


class DurableStandingGrants(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        limit = min(get_int(input, "limit", default=100, minimum=1), 1000)
        grants = await self.runtime.journal.aio.standing_grants(limit)
        seen: set[tuple[str, str]] = set()
        rows = []
        for grant in grants:
            key = (grant.scope, grant.target)
            rows.append({**standing_row(grant), "in_force": key not in seen})
            seen.add(key)
        return {"grants": rows}
