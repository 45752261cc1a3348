"""POST /api/durable_runs: journaled runs, newest first, by chat and/or status."""

from __future__ import annotations

from typing import Any

from python.api._durable_runs import add_chat_name, detail_row, require_status
from python.server.api import ApiHandler, get_int, get_str


class DurableRuns(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        journal = self.runtime.journal
        context_id = get_str(input, "context_id") or None
        status = require_status(input)
        limit = min(get_int(input, "limit", default=100, minimum=1), 1000)
        runs = await journal.aio.list_runs(status, context_id=context_id, limit=limit)
        rows = []
        for run in runs:
            row = detail_row(await journal.aio.read_run(run.id))
            row.pop("decisions")
            rows.append(add_chat_name(row, self.runtime))
        return {"runs": rows}
