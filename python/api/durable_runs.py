"""POST /api/durable_runs: journaled runs, newest first, by chat and/or status; with
``decided: true`` the runs a person decided on, the most recently decided first."""

from __future__ import annotations

from typing import Any

from python.api._durable_runs import add_chat_name, detail_row, require_status
from python.server.api import ApiHandler, get_bool, get_int, get_str


class DurableRuns(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        journal = self.runtime.journal
        context_id = get_str(input, "context_id") or None
        status = require_status(input)
        limit = min(get_int(input, "limit", default=100, minimum=1), 1000)
        decided = get_bool(input, "decided")
        if decided:  # the history of decided runs, latest decision first
            run_ids = await journal.aio.decided_runs(limit)
        else:
            runs = await journal.aio.list_runs(status, context_id=context_id, limit=limit)
            run_ids = [run.id for run in runs]
        rows = []
        for run_id in run_ids:
            row = detail_row(await journal.aio.read_run(run_id))
            if not decided:  # the history shows who decided what
                row.pop("decisions")
            rows.append(add_chat_name(row, self.runtime))
        return {"runs": rows}
