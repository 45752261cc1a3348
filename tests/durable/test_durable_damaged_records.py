"""The journaled loop never uses a damaged record: it holds the run (corrupt_record)."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from durability import CorruptRecord
from durability.records import DecisionRequest
from python.durable import decisions

pytestmark = pytest.mark.unit


def _overwrite(db, sql: str, args: tuple) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(sql, args)


async def test_a_damaged_plan_holds_the_run_and_resume_goes_on(harness):
    plan = {"title": "t", "items": [{"id": "a", "text": "one", "done": False}]}
    harness.model.tool("durable_plan", {"action": "replace", "expected_revision": 0, "plan": plan})
    harness.model.tool("response", {"text": "planned"})
    ctx = harness.chat()
    assert await harness.send(ctx, "plan it") == "planned"
    forged = '{"title":"forged","items":[]}'
    _overwrite(harness.db, "UPDATE documents SET body = ? WHERE context_id = ?", (forged, ctx.id))

    harness.model.tool("durable_plan", {"action": "read"})
    harness.model.tool("response", {"text": "went on"})
    assert await harness.send(ctx, "read the plan") == ""
    run = harness.run_of(ctx.id)
    assert (run.status, run.reason) == ("needs_attention", "corrupt_record")
    detail = run.reason_detail
    assert (detail["record"], detail["context_id"], detail["kind"]) == ("document", ctx.id, "plan")
    assert any("damaged" in str(i.get("content")) for i in ctx.log.output())
    (call,) = harness.journal.open_intents(run.id)  # the read never completed
    assert call.name == "durable_plan"
    with pytest.raises(CorruptRecord):
        harness.journal.read_document(ctx.id, "plan")

    await decisions.apply_decision(
        harness.chats, DecisionRequest(run.id, "resume", version=run.version, actor="alice")
    )
    assert await harness.settle(ctx.id) == "went on"
    assert harness.journal.get_call(call.id).state == "abandoned"
