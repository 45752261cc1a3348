"""POST /api/durable_standing_grant: authorise in advance N automatic retries of interrupted
or failed model calls, per run, for every run of a chat, a profile or a scheduled task
(``scope``: chat | profile | task; ``target``: its id or name; ``attempts`` 0 withdraws).
Journaled with its author and note; every run that uses it records so (#23)."""

from __future__ import annotations

from typing import Any

from durability.records import MAX_RETRY_ATTEMPTS
from durability.records import STANDING_SCOPES as SCOPES
from python.api._durable_runs import actor_of, standing_row
from python.server.api import ApiHandler, bad_request, get_int, get_str


class DurableStandingGrant(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        scope = get_str(input, "scope", required=True)
        if scope not in SCOPES:
            raise bad_request(f"'scope' must be one of {', '.join(SCOPES)}")
        target = get_str(input, "target", required=True).strip()
        if not target:
            raise bad_request("'target' names the chat, profile or task")
        if input.get("attempts") is None:
            raise bad_request("'attempts' is required")
        attempts = get_int(input, "attempts", minimum=0)
        if attempts > MAX_RETRY_ATTEMPTS:
            raise bad_request(f"'attempts' must be at most {MAX_RETRY_ATTEMPTS}")
        note = get_str(input, "note") or None
        grant = await self.runtime.journal.aio.grant_standing(
            scope, target, attempts, actor=actor_of(request, self.runtime), note=note
        )
        return {"grant": standing_row(grant)}
