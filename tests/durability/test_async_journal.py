"""The async facade: one typed twin per journal method, no default-pool cap, light calls
prepared on the loop and heavy ones in the journal's own pool."""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest

from durability import AsyncJournal, CheckpointData, Journal
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit

#: Journal methods without an async twin: construction, lifecycle, and CPU-only helpers.
SYNC_ONLY = {
    "open_sqlite",
    "open_postgres",
    "execute",
    "executor",
    "writes_natively_async",
    "write_op",
    "set_masker",
    "freeze",
    "close",
    "aio",
    "masker",
    "clock",  # the journal's clock (an attribute)
}


@pytest.fixture
def journal(tmp_path):
    opened = Journal.open_sqlite(tmp_path / "journal.sqlite")
    yield opened
    opened.close()


def _public(obj):
    """Public callables of an object, its inherited ones included (the operations are
    declared once and inherited by both facades)."""
    return {n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n))}


def test_every_journal_method_has_a_typed_async_twin(journal):
    wanted = _public(journal) - SYNC_ONLY
    assert len(wanted) > 40  # every operation is found, inherited or not
    assert wanted <= _public(journal.aio), sorted(wanted - _public(journal.aio))
    for name in sorted(wanted):
        sync, twin = getattr(journal, name), getattr(journal.aio, name)
        assert inspect.iscoroutinefunction(twin), name
        assert inspect.signature(twin) == inspect.signature(sync), name
    assert not hasattr(AsyncJournal, "__getattr__")  # nothing forwarded untyped
    assert not hasattr(AsyncJournal, "open_sqlite")


def test_the_facade_is_one_object(journal):
    assert journal.aio is journal.aio and journal.aio.journal is journal


def test_reads_are_not_capped_by_asyncio_s_default_pool(journal, monkeypatch):
    """Twenty reads that can only finish together: more than the default pool's threads."""
    run = journal.admit("chat", "in-1", sha("x")).run
    together = threading.Barrier(20, timeout=30)
    real_read = journal.store.read

    def read(fn):
        together.wait()
        return real_read(fn)

    monkeypatch.setattr(journal.store, "read", read)

    async def main():
        return await asyncio.gather(*(journal.aio.get_run(run.id) for _ in range(20)))

    assert [r.id for r in asyncio.run(main())] == [run.id] * 20


def test_light_calls_are_prepared_on_the_loop_heavy_ones_in_the_pool(journal, monkeypatch):
    run = journal.admit("chat", "in-1", sha("x")).run
    prepared_on: list[str] = []
    real = Journal.commit_result.build

    def noting(*args, **kwargs):
        prepared_on.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(Journal.commit_result, "build", noting)

    async def main():
        light = await journal.aio.record_intent(
            run.id, agent_no=0, seq=0, kind="tool", name="t", args={}, policy="never"
        )
        await journal.aio.commit_result(light.id, {"ok": True}, checkpoint=CheckpointData({}))
        heavy = await journal.aio.record_intent(
            run.id, agent_no=0, seq=1, kind="tool", name="t", args={}, policy="never"
        )
        done = await journal.aio.commit_result(heavy.id, {"text": "x" * 200_000})
        return threading.current_thread().name, done

    loop_thread, done = asyncio.run(main())
    assert prepared_on[0] == loop_thread
    assert prepared_on[1].startswith("journal-aio")
    assert done.result == {"text": "x" * 200_000}
    assert journal.get_call(done.id).state == "completed"


def test_errors_reach_the_awaiting_task(journal):
    from durability import IntentMissing, InvalidArgument

    async def main():
        with pytest.raises(IntentMissing):
            await journal.aio.commit_result("no-such-call", {"ok": 1})
        with pytest.raises(InvalidArgument):
            await journal.aio.admit("", "in-1", sha("x"))

    asyncio.run(main())
