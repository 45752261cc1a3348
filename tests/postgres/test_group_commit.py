"""Group commit of a shared worker's fenced writes on PostgreSQL (#24, goal 2;
durability/store/postgres_batch.py): one transaction carries the writes of several runs,
each behind its own fence. A refused fence fails only its own write (its operation never
runs); a refused operation is rolled back alone (savepoints); a refusal that keeps its
writes commits with the rest. Batches are built by hand here, so what shares a
transaction does not depend on timing."""

from __future__ import annotations

import threading

import psycopg
import pytest

from durability import FencingLost, InvalidArgument, ReplayDivergence
from durability.store.postgres_batch import FencedWriters
from tests.postgres.conftest import sha

pytestmark = pytest.mark.postgres


class Slot:
    def __init__(self, fn) -> None:
        self.fn, self.value, self.error = fn, None, None


def bump(run_id: str, fail: BaseException | None = None):
    """A write: the run's version goes up by one (then ``fail`` is raised, if given)."""

    def op(tx):
        tx.sql.run("UPDATE runs SET version = version + 1 WHERE id = ?", (run_id,))
        if fail is not None:
            raise fail
        return run_id

    return op


def take_over(w2, run_id: str) -> int:
    """w2 takes ``run_id`` as if w1's lease had run out; the new token."""
    with psycopg.connect(w2.store.dsn.conninfo, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {w2.store.namespace}.claims SET expires_at = 0 WHERE run_id = %s",
            (run_id,),
        )
    claim = w2.cluster.claim(run_id)
    assert claim is not None
    return claim.token


@pytest.fixture
def three_runs(open_journal):
    w1, w2 = open_journal("w1"), open_journal("w2")
    runs = [w1.admit(f"chat-{n}", f"in-{n}", sha(str(n))).run for n in range(3)]
    writers = FencedWriters(w1.store, lanes=1)
    yield w1, w2, runs, writers.lanes[0]._batches
    writers.close()


def versions(journal, runs) -> list[int]:
    return [journal.get_run(run.id).version for run in runs]


def test_a_refused_fence_fails_only_its_own_write(three_runs):
    w1, w2, runs, batches = three_runs
    held = w1.cluster.get(runs[1].id).token
    taken = take_over(w2, runs[1].id)
    before = versions(w1, runs)
    slots = [Slot(w1.cluster.fenced(bump(run.id), run.id, None)) for run in runs]
    batches.commit(slots)
    assert [s.value for s in slots] == [runs[0].id, None, runs[2].id]
    assert slots[0].error is None and slots[2].error is None
    assert isinstance(slots[1].error, FencingLost)
    assert slots[1].error.to_dict() == {
        "code": "fencing_lost",
        "message": "the run was claimed by another worker",
        "run_id": runs[1].id,
        "worker_id": "w1",
        "reason": "superseded",
        "held_token": held,
        "current_token": taken,
    }
    assert versions(w1, runs) == [before[0] + 1, before[1], before[2] + 1]
    assert (batches.committed, batches.retried) == (1, 0)  # one transaction, no savepoints


def test_a_call_fence_is_found_through_its_call(three_runs):
    w1, w2, runs, batches = three_runs
    calls = [
        w1.record_intent(run.id, agent_no=0, seq=0, kind="tool", name="t", args={}, policy="hold")
        for run in runs
    ]
    take_over(w2, runs[2].id)
    before = versions(w1, runs)
    slots = [Slot(w1.cluster.fenced(bump(c.run_id), None, c.id)) for c in calls]
    batches.commit(slots)
    assert [s.error is None for s in slots] == [True, True, False]
    assert isinstance(slots[2].error, FencingLost) and slots[2].error.reason == "superseded"
    assert versions(w1, runs) == [before[0] + 1, before[1] + 1, before[2]]


def test_a_refused_operation_is_rolled_back_alone(three_runs):
    w1, _w2, runs, batches = three_runs
    before = versions(w1, runs)
    refusal = InvalidArgument("not this one", field="x")
    ops = [bump(runs[0].id), bump(runs[1].id, fail=refusal), bump(runs[2].id)]
    slots = [Slot(w1.cluster.fenced(op, run.id, None)) for op, run in zip(ops, runs, strict=True)]
    batches.commit(slots)
    assert slots[1].error is refusal and slots[0].error is None and slots[2].error is None
    assert versions(w1, runs) == [before[0] + 1, before[1], before[2] + 1]
    assert (batches.committed, batches.retried) == (1, 1)  # run again with savepoints


def test_a_refusal_that_keeps_its_writes_commits_with_the_rest(three_runs):
    w1, _w2, runs, batches = three_runs
    before = versions(w1, runs)
    kept = ReplayDivergence("held", run_id=runs[0].id)
    ops = [bump(runs[0].id, fail=kept), bump(runs[1].id), bump(runs[2].id)]
    slots = [Slot(w1.cluster.fenced(op, run.id, None)) for op, run in zip(ops, runs, strict=True)]
    batches.commit(slots)
    assert slots[0].error is kept and [s.value for s in slots[1:]] == [runs[1].id, runs[2].id]
    assert versions(w1, runs) == [b + 1 for b in before]
    assert batches.retried == 0


def test_every_write_refused_commits_nothing(three_runs):
    w1, w2, runs, batches = three_runs
    for run in runs:
        take_over(w2, run.id)
    before = versions(w1, runs)
    slots = [Slot(w1.cluster.fenced(bump(run.id), run.id, None)) for run in runs]
    batches.commit(slots)
    assert all(isinstance(s.error, FencingLost) for s in slots)
    assert versions(w1, runs) == before and batches.committed == 0


def test_concurrent_steps_through_the_journal_are_all_recorded(open_journal):
    """Group commit on: eight runs step at once; every intent and result is recorded once,
    and a run taken over meanwhile is refused without failing the others."""
    w1, w2 = open_journal("w1", pool_size=8), open_journal("w2")
    w1.store.group_commit = True
    runs = [w1.admit(f"chat-{n}", f"in-{n}", sha(str(n))).run for n in range(8)]
    take_over(w2, runs[7].id)
    errors: list[BaseException] = []

    def steps(run_id: str) -> None:
        try:
            for seq in range(10):
                call = w1.record_intent(
                    run_id, agent_no=0, seq=seq, kind="tool", name="t", args={}, policy="hold"
                )
                w1.commit_result(call.id, {"seq": seq})
        except BaseException as exc:  # collected for the assertions
            errors.append(exc)

    threads = [threading.Thread(target=steps, args=(run.id,)) for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(errors) == 1 and isinstance(errors[0], FencingLost), errors
    for run in runs[:7]:
        results = [c.result for c in w1.list_calls(run.id)]
        assert results == [{"seq": s} for s in range(10)]
    assert w2.list_calls(runs[7].id) == []
    assert w1.store._writer.batches >= 1
