"""Checkpoint storage grows with the step, not with the chat."""

from __future__ import annotations

import sqlite3

import pytest

from durability import CheckpointData, Journal
from tests.durability.conftest import sha

pytestmark = [pytest.mark.unit, pytest.mark.slow]

STEPS = 1000


def stored_bytes(path) -> int:
    conn = sqlite3.connect(path)
    try:
        blobs = conn.execute("SELECT COALESCE(SUM(length(data)), 0) FROM blobs").fetchone()[0]
        bodies = conn.execute(
            "SELECT COALESCE(SUM(length(CAST(body AS BLOB))), 0) FROM checkpoints"
        ).fetchone()[0]
        return blobs + bodies
    finally:
        conn.close()


def test_bytes_per_step_do_not_track_chat_length(tmp_path):
    path = tmp_path / "journal.sqlite"
    added: dict[int, int] = {}
    history: list[dict] = []
    with Journal.open_sqlite(path) as journal:
        run = journal.admit("chat", "in-1", sha("long chat")).run
        for step in range(1, STEPS + 1):
            history.append({"role": "user", "content": f"step {step}: " + "question " * 20})
            history.append({"role": "assistant", "content": f"answer {step}: " + "words " * 30})
            state = {"iteration": step, "plan_revision": step // 10}
            measure = step in (10, STEPS)
            before = stored_bytes(path) if measure else 0
            journal.write_checkpoint(
                run.id, CheckpointData(state=state, histories={"0": history}, seq=step)
            )
            if measure:
                added[step] = stored_bytes(path) - before
        whole_chat = sum(len(m["content"]) for m in history)
        assert journal.latest_checkpoint(run.id).histories["0"] == history
    assert added[10] > 0
    assert added[STEPS] <= 2 * added[10], added
    assert added[STEPS] * 50 < whole_chat  # a full copy per step would be ~whole_chat


def test_reopened_journal_keeps_growth_flat(tmp_path):
    """Without the in-memory cache, the next step still stores only its own messages."""
    path = tmp_path / "journal.sqlite"
    history = [{"role": "user", "content": f"m{i} " + "x" * 200} for i in range(400)]
    with Journal.open_sqlite(path) as journal:
        run = journal.admit("chat", "in-1", sha("x")).run
        journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": history}))
    with Journal.open_sqlite(path) as journal:
        before = stored_bytes(path)
        history.append({"role": "assistant", "content": "one more " + "y" * 200})
        journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": history}))
        assert stored_bytes(path) - before < 1500
        assert journal.latest_checkpoint(run.id).histories["0"] == history
