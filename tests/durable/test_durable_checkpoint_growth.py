"""Checkpoint bytes per step track the step, not the length of the chat."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

pytestmark = pytest.mark.unit

STEPS = 16


async def test_bytes_per_iteration_stay_flat(harness):
    for i in range(STEPS):
        harness.model.tool("notify_user", {"message": f"step {i} " + "x" * 200})
    harness.model.tool("response", {"text": "done"})
    ctx = harness.chat()
    assert await harness.send(ctx, "go", timeout=240) == "done"
    with contextlib.closing(sqlite3.connect(harness.db)) as db:
        checkpoints = db.execute(
            "SELECT created_at, length(body) FROM checkpoints ORDER BY id"
        ).fetchall()
        blob_bytes = dict(
            db.execute("SELECT created_at, sum(length(data)) FROM blobs GROUP BY created_at")
        )
    per_step = [body + (blob_bytes.get(at) or 0) for at, body in checkpoints]
    assert len(per_step) == STEPS + 2  # the base checkpoint and one per iteration
    early = sum(per_step[2:7]) / 5
    late = sum(per_step[-6:-1]) / 5
    assert late < early * 1.5, (early, late, per_step)
