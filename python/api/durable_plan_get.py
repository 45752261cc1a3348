"""POST /api/durable_plan_get: a chat's plan, its revision and unresolved conflicts."""

from __future__ import annotations

from typing import Any

from durability.documents import PLAN_KIND
from python.api._durable_plan import plan_conflicts, require_chat_id
from python.server.api import ApiHandler


class DurablePlanGet(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        journal = self.runtime.journal
        ctx_id = await require_chat_id(self.runtime, input)
        document = await journal.aio.read_document(ctx_id, PLAN_KIND)
        return {
            "context_id": ctx_id,
            "plan": document.value,
            "revision": document.revision,
            "conflicts": await plan_conflicts(journal, ctx_id),
        }
