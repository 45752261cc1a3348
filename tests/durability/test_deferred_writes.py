"""Results and checkpoints that ride on the run's next write (durability/journal/_deferral.py),
on a real SQLite file: one transaction for a step's result and the next intent, a lone
deferred write durable within its bound, a refusal told to the run's next write, reads that
see what was handed over, and only what recovery repairs without a person deferred."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from durability import CheckpointData, DeferredWriteRefused, Journal
from durability.config import journal_defer_seconds
from durability.errors import ConfigurationError
from durability.journal._deferral import DEFERRABLE_POLICIES
from durability.recovery import HOLD_POLICY, SAFE_REPLAY_POLICY
from tests.integration._helpers import wait_until

pytestmark = pytest.mark.unit

DEADLINE = 10.0


def _open(tmp_path: Path, defer_seconds: float = 5.0) -> Journal:
    return Journal.open_sqlite(tmp_path / "journal.sqlite", defer_seconds=defer_seconds)


def _run(journal: Journal, name: str = "c1") -> str:
    return journal.admit(name, f"in-{name}", "0" * 64, message="hello").run.id


def _intent(journal: Journal, run_id: str, seq: int, policy: str = SAFE_REPLAY_POLICY):
    return journal.record_intent(
        run_id, agent_no=0, seq=seq, kind="tool", name="response", args={"n": seq}, policy=policy
    )


def _checkpoint(seq: int) -> CheckpointData:
    return CheckpointData({"iteration": seq}, {"0": [{"role": "user", "content": "hi"}]}, seq=seq)


def _on_disk(path: Path, call_id: str) -> str:
    """The call's state as another connection sees the file (not through the journal)."""
    with closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT state FROM calls WHERE id = ?", (call_id,)).fetchone()[0]


def test_the_safe_replay_policy_is_the_one_recovery_replays():
    assert {SAFE_REPLAY_POLICY} == DEFERRABLE_POLICIES


def test_a_result_and_a_checkpoint_share_one_transaction_with_the_next_intent(tmp_path):
    journal = _open(tmp_path)
    try:
        run_id = _run(journal)
        call = _intent(journal, run_id, 0)
        before = journal.store.batches
        assert journal.defer_result(call.id, {"ok": True}, checkpoint=_checkpoint(0)) is True
        assert journal.store.batches == before  # nothing committed yet
        assert _on_disk(journal.store.path, call.id) == "open"

        nxt = _intent(journal, run_id, 1)
        assert journal.store.batches == before + 1  # the intent carried them: one commit
        assert _on_disk(journal.store.path, call.id) == "completed"
        assert _on_disk(journal.store.path, nxt.id) == "open"
        assert journal.store.deferred_alone == 0
        assert journal.latest_checkpoint(run_id).seq == 0
    finally:
        journal.close()


def test_other_results_commit_at_once(tmp_path):
    journal = _open(tmp_path)
    try:
        run_id = _run(journal)
        held = _intent(journal, run_id, 0, policy=HOLD_POLICY)  # e.g. a model call
        before = journal.store.batches
        assert journal.defer_result(held.id, {"response": "hi"}) is False
        assert journal.store.batches == before + 1
        assert _on_disk(journal.store.path, held.id) == "completed"
    finally:
        journal.close()


def test_a_lone_deferred_result_is_durable_within_its_bound(tmp_path):
    journal = _open(tmp_path, defer_seconds=0.005)
    try:
        run_id = _run(journal)
        call = _intent(journal, run_id, 0)
        started = time.monotonic()
        assert journal.defer_result(call.id, {"ok": True})
        wait_until(
            lambda: _on_disk(journal.store.path, call.id) == "completed", DEADLINE, "the commit"
        )
        assert journal.store.deferred_alone == 1
        # not a speed assertion: only that it did not wait for a write that never came
        assert time.monotonic() - started < DEADLINE
    finally:
        journal.close()


def _checkpoint_on_disk(path: Path, run_id: str) -> int:
    with closing(sqlite3.connect(path)) as db:
        return db.execute(
            "SELECT count(*) FROM checkpoints WHERE run_id = ?", (run_id,)
        ).fetchone()[0]


def test_a_write_with_its_own_bound_waits_for_the_next_write_past_the_default(tmp_path):
    """A run's start checkpoint (python/durable/checkpoint.py) waits longer than the
    journal's bound for the run's first intent: it commits with it, not on its own."""
    journal = _open(tmp_path, defer_seconds=0.005)
    try:
        run_id = _run(journal)
        before = journal.store.batches
        assert journal.defer_checkpoint(run_id, _checkpoint(0), within=60.0) is True
        writer = journal.store._writer
        wait_until(lambda: writer._timer_due is not None, DEADLINE, "the writer's timer")
        assert writer._timer_due > time.monotonic() + 30  # its own bound, not 5 ms
        assert _checkpoint_on_disk(journal.store.path, run_id) == 0
        call = _intent(journal, run_id, 0)
        assert journal.store.batches == before + 1  # the intent carried it: one commit
        assert _checkpoint_on_disk(journal.store.path, run_id) == 1
        assert _on_disk(journal.store.path, call.id) == "open"
        assert journal.store.deferred_alone == 0
    finally:
        journal.close()


def test_the_soonest_bound_of_the_parked_writes_is_kept(tmp_path):
    """A write parked behind one with a longer bound still commits within its own, and
    takes the longer one along (order kept)."""
    journal = _open(tmp_path, defer_seconds=0.005)
    try:
        run_id = _run(journal)
        call = _intent(journal, run_id, 0)
        assert journal.defer_checkpoint(run_id, _checkpoint(0), within=60.0) is True
        assert journal.defer_result(call.id, {"ok": True}) is True
        wait_until(
            lambda: _on_disk(journal.store.path, call.id) == "completed", DEADLINE, "the commit"
        )
        assert _checkpoint_on_disk(journal.store.path, run_id) == 1
        assert journal.store.deferred_alone == 2
    finally:
        journal.close()


def test_close_commits_what_is_deferred(tmp_path):
    journal = _open(tmp_path, defer_seconds=60.0)
    run_id = _run(journal)
    call = _intent(journal, run_id, 0)
    journal.defer_result(call.id, {"ok": True})
    journal.defer_checkpoint(run_id, _checkpoint(1))
    assert _on_disk(journal.store.path, call.id) == "open"
    journal.close()
    assert _on_disk(tmp_path / "journal.sqlite", call.id) == "completed"
    with Journal.open_sqlite(tmp_path / "journal.sqlite") as again:
        assert again.latest_checkpoint(run_id).seq == 1


def test_reads_see_deferred_writes(tmp_path):
    journal = _open(tmp_path, defer_seconds=60.0)
    try:
        run_id = _run(journal)
        call = _intent(journal, run_id, 0)
        journal.defer_result(call.id, {"ok": True}, checkpoint=_checkpoint(0))
        assert [c.state for c in journal.list_calls(run_id)] == ["completed"]
        journal.defer_checkpoint(run_id, _checkpoint(1))
        assert journal.latest_checkpoint(run_id).seq == 1

        async def through_the_facade() -> None:
            aio = journal.aio
            nxt = await aio.record_intent(
                run_id, agent_no=0, seq=1, kind="tool", name="r", args={}, policy="safe_replay"
            )
            assert await aio.defer_result(nxt.id, {"ok": 2}) is True
            assert await aio.defer_checkpoint(run_id, _checkpoint(2)) is True
            assert (await aio.get_call(nxt.id)).state == "completed"
            assert (await aio.latest_checkpoint(run_id)).seq == 2

        asyncio.run(through_the_facade())
    finally:
        journal.close()


@pytest.mark.parametrize("alone", [False, True], ids=["same_batch", "committed_alone"])
def test_a_refused_deferred_write_fails_the_runs_next_write(tmp_path, caplog, alone):
    journal = _open(tmp_path, defer_seconds=0.005 if alone else 60.0)
    try:
        run_id = _run(journal)
        call = _intent(journal, run_id, 0)
        journal.commit_result(call.id, {"first": True})
        journal.deferrals.calls[call.id] = run_id  # as if its result were still to come
        with caplog.at_level(logging.WARNING, logger="a0.durability.journal"):
            assert journal.defer_result(call.id, {"second": True})  # a conflicting result
            if alone:  # committed (and refused) on its own before the next write came
                wait_until(lambda: journal.store.unsettled == 0, DEADLINE, "the lone commit")
            with pytest.raises(DeferredWriteRefused) as raised:
                _intent(journal, run_id, 1)
        assert raised.value.code == "deferred_write_refused"
        assert raised.value.to_dict()["refused_code"] == "result_conflict"
        assert "result_conflict" in caplog.text and run_id in caplog.text
        calls = journal.list_calls(run_id)
        assert [(c.seq, c.result) for c in calls] == [(0, {"first": True})]  # nothing written
        assert _intent(journal, run_id, 1).seq == 1  # told once: the run goes on
    finally:
        journal.close()


def test_a_refusal_of_one_run_does_not_fail_another(tmp_path):
    journal = _open(tmp_path, defer_seconds=60.0)
    try:
        first, second = _run(journal, "a"), _run(journal, "b")
        call = _intent(journal, first, 0)
        journal.commit_result(call.id, {"first": True})
        journal.deferrals.calls[call.id] = first
        journal.defer_result(call.id, {"other": True})
        assert _intent(journal, second, 0).state == "open"  # carried the refused write
        with pytest.raises(DeferredWriteRefused):
            _intent(journal, first, 1)
    finally:
        journal.close()


def test_zero_seconds_commits_everything_at_once(tmp_path):
    journal = _open(tmp_path, defer_seconds=0)
    try:
        run_id = _run(journal)
        call = _intent(journal, run_id, 0)
        assert journal.defer_result(call.id, {"ok": True}) is False
        assert journal.defer_checkpoint(run_id, _checkpoint(0)) is False
        assert _on_disk(journal.store.path, call.id) == "completed"
    finally:
        journal.close()


def test_the_bound_is_read_from_the_environment():
    assert journal_defer_seconds({}) == pytest.approx(0.005)
    assert journal_defer_seconds({"A0_JOURNAL_DEFER_MS": "20"}) == pytest.approx(0.02)
    assert journal_defer_seconds({"A0_JOURNAL_DEFER_MS": "0"}) == 0
    for bad in ("soon", "-1", "60001"):
        with pytest.raises(ConfigurationError) as raised:
            journal_defer_seconds({"A0_JOURNAL_DEFER_MS": bad})
        assert raised.value.code == "invalid_configuration"


def test_the_facade_tells_a_refusal_to_the_runs_next_intent(tmp_path):
    journal = _open(tmp_path, defer_seconds=60.0)

    async def steps() -> None:
        aio = journal.aio
        run_id = (await aio.admit("c1", "in-1", "0" * 64, message="hi")).run.id
        call = await aio.record_intent(
            run_id, agent_no=0, seq=0, kind="tool", name="r", args={}, policy="safe_replay"
        )
        await aio.commit_result(call.id, {"first": True})
        journal.deferrals.calls[call.id] = run_id
        assert await aio.defer_result(call.id, {"second": True})
        with pytest.raises(DeferredWriteRefused):
            await aio.record_intent(
                run_id, agent_no=0, seq=1, kind="tool", name="r", args={}, policy="hold"
            )
        assert [c.seq for c in await aio.list_calls(run_id)] == [0]

    try:
        asyncio.run(steps())
    finally:
        journal.close()


def test_runs_in_many_threads_keep_every_deferred_write(tmp_path):
    import threading

    journal = _open(tmp_path)
    steps, runs = 40, 8
    run_ids = [_run(journal, f"t{i}") for i in range(runs)]
    errors: list[BaseException] = []

    def one(run_id: str) -> None:
        try:
            for seq in range(steps):
                call = _intent(journal, run_id, seq)
                journal.defer_result(call.id, {"seq": seq}, checkpoint=_checkpoint(seq))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(run_id,)) for run_id in run_ids]
    before = journal.store.batches
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert not errors
    try:
        for run_id in run_ids:
            calls = journal.list_calls(run_id)
            assert [(c.seq, c.state, c.result) for c in calls] == [
                (seq, "completed", {"seq": seq}) for seq in range(steps)
            ]
            assert journal.latest_checkpoint(run_id).seq == steps - 1
        # one transaction per intent at most (results rode along), plus the final flush and
        # any a stalled thread let commit alone
        alone = journal.store.deferred_alone
        assert journal.store.batches - before <= steps * runs + 1 + alone
    finally:
        journal.close()
