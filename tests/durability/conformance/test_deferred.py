"""Deferred results and checkpoints (docs/durability.md, "Results ride on the next write"):
on every engine a deferred write is seen by the next read and by the run's next write;
SQLite defers a safe-replay result and a checkpoint, PostgreSQL commits them at once."""

from __future__ import annotations

import asyncio

import pytest

from durability import CheckpointData
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


def _data(seq: int) -> CheckpointData:
    return CheckpointData({"n": seq}, {"0": [{"role": "user", "content": f"m{seq}"}]}, seq=seq)


def _intent(journal, run_id: str, seq: int, policy: str = "safe_replay"):
    return journal.record_intent(
        run_id, agent_no=0, seq=seq, kind="tool", name="response", args={}, policy=policy
    )


def test_deferred_writes_are_read_back_and_kept_in_order(journal):
    defers = journal.store.engine == "sqlite"
    run_id = journal.admit("chat-1", "in-1", sha("hello")).run.id
    call = _intent(journal, run_id, 0)
    assert journal.defer_result(call.id, {"ok": 1}, checkpoint=_data(0)) is defers
    assert journal.get_call(call.id).result == {"ok": 1}
    assert journal.defer_checkpoint(run_id, _data(1)) is defers
    assert journal.latest_checkpoint(run_id).seq == 1
    held = _intent(journal, run_id, 1, policy="hold")
    assert journal.defer_result(held.id, {"ok": 2}) is False  # never deferred
    journal.set_run_status(run_id, "completed")
    assert [c.state for c in journal.list_calls(run_id)] == ["completed", "completed"]


def test_deferred_writes_through_the_facade(journal):
    defers = journal.store.engine == "sqlite"

    async def steps() -> None:
        aio = journal.aio
        run_id = (await aio.admit("chat-2", "in-2", sha("hi"))).run.id
        for seq in range(3):
            call = await aio.record_intent(
                run_id, agent_no=0, seq=seq, kind="tool", name="r", args={}, policy="safe_replay"
            )
            assert await aio.defer_result(call.id, {"seq": seq}, checkpoint=_data(seq)) is defers
        await aio.flush()
        calls = await aio.list_calls(run_id)
        assert [(c.seq, c.state, c.result) for c in calls] == [
            (seq, "completed", {"seq": seq}) for seq in range(3)
        ]
        assert (await aio.latest_checkpoint(run_id)).seq == 2

    asyncio.run(steps())
