"""POST /api/durable_conflicts: document (plan) conflicts waiting for a person, or all."""

from __future__ import annotations

from typing import Any

from python.api._chat import context_id_of
from python.api._durable_plan import conflict_row
from python.server.api import ApiHandler, bad_request, get_bool, get_str

KINDS = ("plan",)


class DurableConflicts(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        journal = self.runtime.journal
        ctx_id = context_id_of(input, "context_id", "context") or None
        kind = get_str(input, "kind") or None
        if kind is not None and kind not in KINDS:
            raise bad_request(f"'kind' must be one of {', '.join(KINDS)}", field="kind")
        unresolved_only = not get_bool(input, "include_resolved")
        conflicts = await journal.aio.list_conflicts(ctx_id, unresolved_only=unresolved_only)
        rows = [conflict_row(c) for c in conflicts if kind is None or c.kind == kind]
        return {"conflicts": rows}
