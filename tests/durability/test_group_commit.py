"""Group commit: concurrent writes share one transaction; a refusal rolls back only itself."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from durability import ActiveRunExists, Journal, JournalClosed
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        time.sleep(0.005)


@pytest.fixture
def journal(tmp_path):
    opened = Journal.open_sqlite(tmp_path / "journal.sqlite")
    yield opened
    opened.close()


def test_queued_writes_commit_in_one_transaction(journal):
    store = journal.store
    gate = threading.Event()
    entered = threading.Event()

    def blocker(tx):
        entered.set()
        assert gate.wait(timeout=30)

    with ThreadPoolExecutor(21) as pool:
        first = pool.submit(store.write, blocker)
        assert entered.wait(timeout=10)
        batches_before = store.batches
        futures = [pool.submit(journal.admit, f"c{i}", f"in-{i}", sha(str(i))) for i in range(18)]
        # one refusal in the same batch: a second input for chat c0
        futures.append(pool.submit(journal.admit, "c0", "in-x", sha("x")))
        wait_for(lambda: store._writer.pending == 19)
        gate.set()
        first.result(timeout=10)
        results = [f.exception(timeout=30) or f.result() for f in futures]
    assert store.batches == batches_before + 2  # the blocker's batch, then all 19 together
    # each queued caller woke once: one to lead the batch of 19, the others answered by it
    assert store._writer.wakeups == 19
    assert store._writer.retried_batches == 1  # the refusal: the batch again, in savepoints
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(refused) == 1 and isinstance(refused[0], ActiveRunExists)
    assert len(journal.list_runs()) == 18


def test_writes_after_close_are_refused(tmp_path):
    journal = Journal.open_sqlite(tmp_path / "journal.sqlite")
    journal.close()
    with pytest.raises(JournalClosed) as info:
        journal.admit("c", "in-1", sha("x"))
    assert info.value.code == "journal_closed"
    with pytest.raises(JournalClosed):
        journal.list_runs()
    journal.close()  # closing twice is harmless


def test_a_bug_in_one_write_does_not_poison_the_writer(journal):
    def broken(tx):
        tx.contexts.ensure("c", 1.0)
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError):
        journal.store.write(broken)
    assert journal.admit("c2", "in-1", sha("x")).created
    # the broken write's row was rolled back
    assert (
        journal.store.read_raw(
            lambda c: c.execute("SELECT COUNT(*) FROM contexts WHERE id = 'c'").fetchone()[0]
        )
        == 0
    )


def test_a_lone_write_runs_in_the_callers_thread(journal):
    """No hand-off: with no batch in flight the caller leads its own transaction."""
    seen = []
    journal.store.write(lambda tx: seen.append(threading.get_ident()))
    assert seen == [threading.get_ident()]


def test_a_write_may_not_start_another(journal):
    def nested(tx):
        journal.store.write(lambda inner: None)

    with pytest.raises(RuntimeError, match="may not start another write"):
        journal.store.write(nested)
    assert journal.admit("c", "in-1", sha("x")).created  # the writer is still usable


def test_concurrent_callers_each_get_their_own_answer(journal):
    def admit(i):
        return journal.admit(f"c{i}", f"in-{i}", sha(str(i))).run.context_id

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(admit, range(200)))
    assert answers == [f"c{i}" for i in range(200)]
    assert len(journal.list_runs(limit=500)) == 200
    assert journal.store.batches <= 200


def test_async_writes_share_batches_and_never_block_the_loop(journal):
    store = journal.store
    gate = threading.Event()
    entered = threading.Event()
    loop_threads: list[int] = []
    write_threads: list[int] = []

    def blocker(tx):
        entered.set()
        assert gate.wait(timeout=30)

    def noted(tx):
        write_threads.append(threading.get_ident())
        return "ok"

    async def main():
        loop_threads.append(threading.get_ident())
        held = asyncio.ensure_future(store.write_async(blocker))
        # the loop runs on (in a worker thread's wait) while the blocker holds the writer
        assert await asyncio.to_thread(entered.wait, 30), "the blocker never ran"
        writes = [asyncio.ensure_future(store.write_async(noted)) for _ in range(40)]
        ticks = 0
        deadline = time.monotonic() + 30
        while store._writer.pending < 40:
            assert time.monotonic() < deadline, f"{store._writer.pending} of 40 writes queued"
            ticks += 1
            await asyncio.sleep(0.001)
        batches = store.batches
        gate.set()
        answers = await asyncio.gather(*writes)
        await held
        return answers, ticks, store.batches - batches

    answers, ticks, batches = asyncio.run(main())
    assert answers == ["ok"] * 40 and ticks >= 1  # the loop ran while they were queued
    assert batches == 2  # the blocker's, then the 40 queued writes together
    assert set(write_threads).isdisjoint(loop_threads)  # the disk never held the loop
    assert store._writer.wakeups <= 2  # the writer thread, once per turn: no caller threads


def test_a_cancelled_async_write_still_commits_and_the_writer_goes_on(journal):
    gate = threading.Event()
    entered = threading.Event()

    def slow(tx):
        entered.set()
        assert gate.wait(timeout=30)
        tx.contexts.ensure("kept", 1.0)

    async def main():
        task = asyncio.ensure_future(journal.store.write_async(slow))
        assert await asyncio.to_thread(entered.wait, 30), "the write never started"
        task.cancel()  # while the writer is inside it
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        admission = await journal.aio.admit("c", "in-1", sha("x"))
        return admission.created

    assert asyncio.run(main())
    count = "SELECT COUNT(*) FROM contexts WHERE id = 'kept'"
    assert journal.store.read_raw(lambda c: c.execute(count).fetchone()[0]) == 1


def test_threads_and_a_loop_write_together(journal):
    """Callers of both kinds queue behind each other; each gets its own answer."""

    def thread_writes(i):
        return journal.admit(f"t{i}", f"in-t{i}", sha(f"t{i}")).run.context_id

    async def loop_writes():
        admissions = await asyncio.gather(
            *(journal.aio.admit(f"a{i}", f"in-a{i}", sha(f"a{i}")) for i in range(100))
        )
        return [a.run.context_id for a in admissions]

    with ThreadPoolExecutor(8) as pool:
        threads = pool.map(thread_writes, range(100))
        from_loop = asyncio.run(loop_writes())
        from_threads = list(threads)
    assert from_loop == [f"a{i}" for i in range(100)]
    assert from_threads == [f"t{i}" for i in range(100)]
    assert len(journal.list_runs(limit=500)) == 200


def test_close_answers_queued_async_writes_and_stops_the_writer_thread(tmp_path):
    journal = Journal.open_sqlite(tmp_path / "journal.sqlite")
    writer = journal.store._writer

    async def main():
        writes = [journal.aio.admit(f"c{i}", f"in-{i}", sha(str(i))) for i in range(20)]
        pending = asyncio.gather(*writes)
        await asyncio.sleep(0)  # a yield, not a wait: each admit runs to its queueing
        closing = asyncio.get_running_loop().run_in_executor(None, journal.close)
        answers = await pending
        await closing
        return answers

    answers = asyncio.run(main())
    assert all(a.created for a in answers)
    assert writer._thread is not None
    writer._thread.join(timeout=10)
    assert not writer._thread.is_alive()
    with pytest.raises(JournalClosed):
        asyncio.run(journal.aio.admit("late", "in-late", sha("late")))
