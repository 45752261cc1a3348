"""Concurrent callers: the invariants hold when many threads race on one journal."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from durability import ActiveRunExists, DurabilityError
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit

THREADS = 16


def race(fn, n=THREADS):
    barrier = threading.Barrier(n)

    def one(i):
        barrier.wait(timeout=30)
        try:
            return fn(i)
        except DurabilityError as exc:
            return exc

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_racing_on_one_input_id_starts_one_run(journal):
    outcomes = race(lambda i: journal.admit("chat", "in-1", sha("same")))
    created = [o for o in outcomes if o.created]
    assert len(created) == 1
    assert {o.run.id for o in outcomes} == {created[0].run.id}


def test_racing_copies_of_one_input_each_naming_a_new_chat_start_one_run(journal):
    # What a server does for N identical requests without a chat id: each generates one.
    outcomes = race(lambda i: journal.admit(f"new-chat-{i}", "in-1", sha("same")))
    assert not [o for o in outcomes if isinstance(o, DurabilityError)]
    created = [o for o in outcomes if o.created]
    assert len(created) == 1
    winner = created[0].run
    assert {(o.run.id, o.run.context_id) for o in outcomes} == {(winner.id, winner.context_id)}
    assert [r.id for r in journal.list_runs()] == [winner.id]
    losers = {f"new-chat-{i}" for i in range(THREADS)} - {winner.context_id}
    assert all(journal.list_events(context_id=c) == [] for c in losers)


def test_racing_inputs_on_one_chat_admit_exactly_one(journal):
    outcomes = race(lambda i: journal.admit("chat", f"in-{i}", sha(str(i))))
    winners = [o for o in outcomes if not isinstance(o, DurabilityError)]
    assert len(winners) == 1
    assert all(isinstance(o, ActiveRunExists) for o in outcomes if o not in winners)
    assert len(journal.list_runs()) == 1


def test_racing_results_keep_the_first(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="tool", name="t", args={}, policy="hold"
    )
    outcomes = race(lambda i: journal.commit_result(call.id, {"n": i}))
    kept = journal.get_call(call.id).result
    wins = [o for o in outcomes if not isinstance(o, DurabilityError)]
    assert len(wins) == 1 and wins[0].result == kept
    assert sum(o.code == "result_conflict" for o in outcomes if o not in wins) == THREADS - 1


def test_many_chats_in_parallel_all_land(journal):
    outcomes = race(lambda i: journal.admit(f"chat-{i}", f"in-{i}", sha(str(i))))
    assert all(o.created for o in outcomes)
    assert len(journal.list_runs("active")) == THREADS


async def test_async_surface(journal):
    admission = await journal.aio.admit("chat", "in-1", sha("x"))
    call = await journal.aio.record_intent(
        admission.run.id, agent_no=0, seq=1, kind="model", name="chat", args={}, policy="hold"
    )
    done = await journal.aio.commit_result(call.id, "hi")
    assert done.state == "completed"
    with pytest.raises(ActiveRunExists):
        await journal.aio.admit("chat", "in-2", sha("y"))
