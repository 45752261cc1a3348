"""POST /api/durable_run: one run with its phase, calls (with their evidence), decisions, the
decisions that fit it now (and why the others do not) and the standing grants it used."""

from __future__ import annotations

from typing import Any

from python.api._durable_evidence import add_call_evidence, add_evidence
from python.api._durable_runs import add_chat_name, add_standing_uses, detail_row, require_run_id
from python.server.api import ApiHandler


class DurableRun(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        runtime = self.runtime
        detail = await runtime.journal.aio.read_run(require_run_id(input))
        row = detail_row(detail)
        chats = runtime.chats
        evidence = chats.evidence or chats.receipts  # local, or over SSH where the call ran
        row = await add_evidence(row, detail.calls, evidence, runtime.journal.masker)
        events = await runtime.journal.aio.list_events(
            run_id=row["run_id"], limit=100_000, verify=False
        )
        row = add_call_evidence(row, events)
        row = await add_standing_uses(row, runtime.journal)
        return {"run": add_chat_name(row, runtime)}
