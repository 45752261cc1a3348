"""POST /api/durable_retry_grant: allow a bounded number of retries of failed model calls."""

from __future__ import annotations

from typing import Any

from durability.records import MAX_RETRY_ATTEMPTS, TERMINAL_RUN_STATUSES
from python.api._durable_runs import actor_of, detail_row, require_run_id
from python.durable import decisions
from python.server.api import ApiError, ApiHandler, bad_request, get_int


class DurableRetryGrant(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        journal = self.runtime.journal
        run_id = require_run_id(input)
        if input.get("attempts") is None:
            raise bad_request("'attempts' is required")
        attempts = get_int(input, "attempts", minimum=1)
        if attempts > MAX_RETRY_ATTEMPTS:
            raise bad_request(f"'attempts' must be at most {MAX_RETRY_ATTEMPTS}")
        if (await journal.aio.get_run(run_id)).status in TERMINAL_RUN_STATUSES:
            raise ApiError("run_not_active", "The run has ended; a retry grant cannot help.")
        actor = actor_of(request, self.runtime)
        grant = await decisions.grant_retries(self.runtime.chats, run_id, attempts, actor=actor)
        detail = await journal.aio.read_run(run_id)
        return {
            "grant": {
                "id": grant.id,
                "attempts": grant.attempts,
                "remaining": grant.remaining,
                "actor": grant.actor,
                "created_at": grant.created_at,
            },
            "run": detail_row(detail),
        }
