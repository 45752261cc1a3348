"""Group commit: concurrent writes share one transaction; a refusal rolls back only itself."""

from __future__ import annotations

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
        tx.ensure_context("c", 1.0)
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
