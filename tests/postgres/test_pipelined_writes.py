"""Writes in pipeline mode (#24): BEGIN, the transaction's id, the fence and the operation's
first statement reach PostgreSQL together; the fence is verified before anything commits.
An operation may therefore have run its statements when the fence turns out refused: the
transaction is rolled back whole, and the caller gets the fence's refusal, never the
operation's own answer or error."""

from __future__ import annotations

import pytest

from durability import FencingLost
from tests.postgres.conftest import sha, wait_for

pytestmark = pytest.mark.postgres


def intent(journal, run_id, seq=0, args=None):
    return journal.record_intent(
        run_id, agent_no=0, seq=seq, kind="tool", name="t", args=args or {"n": seq}, policy="hold"
    )


def superseded(open_journal):
    """w1 admits a run and records an intent; its lease runs out and w2 takes the run."""
    w1, w2 = open_journal("w1", lease_seconds=0.4), open_journal("w2")
    run = w1.admit("chat", "in-1", sha("x")).run
    call = intent(w1, run.id)
    old = w1.cluster.get(run.id)
    taken = wait_for(lambda: w2.cluster.claim(run.id), what="the lease to expire")
    return w1, w2, run, call, old, taken


def expected_refusal(run_id: str, old: int, new: int) -> dict[str, object]:
    return {
        "code": "fencing_lost",
        "message": "the run was claimed by another worker",
        "run_id": run_id,
        "worker_id": "w1",
        "reason": "superseded",
        "held_token": old,
        "current_token": new,
    }


def test_a_refused_intent_writes_nothing_and_raises_the_fence_refusal(open_journal):
    w1, w2, run, call, old, taken = superseded(open_journal)
    version = w2.get_run(run.id).version
    with pytest.raises(FencingLost) as info:
        intent(w1, run.id, seq=1)  # the new position's insert ran, then was rolled back
    assert info.value.to_dict() == expected_refusal(run.id, old.token, taken.token)
    assert [c.id for c in w2.list_calls(run.id)] == [call.id]
    assert w2.get_run(run.id).version == version


def test_a_refused_fence_outranks_an_operation_that_keeps_its_writes(open_journal):
    """A different call at a recorded position holds the run (a refusal that commits the
    hold): under a refused fence nothing of it commits and the refusal is the fence's."""
    w1, w2, run, _call, old, taken = superseded(open_journal)
    with pytest.raises(FencingLost) as info:
        intent(w1, run.id, seq=0, args={"n": "different"})
    assert info.value.to_dict() == expected_refusal(run.id, old.token, taken.token)
    after = w2.get_run(run.id)
    assert after.status == "active" and after.reason is None


def test_a_refused_fence_outranks_an_operation_that_fails(open_journal):
    """The call already has a result, so the operation itself fails (a conflict): the
    caller is told about the fence."""
    w1, w2, run, call, old, taken = superseded(open_journal)
    w2.commit_result(call.id, "the new owner's result")
    with pytest.raises(FencingLost) as info:
        w1.commit_result(call.id, "a late, different result")
    assert info.value.to_dict() == expected_refusal(run.id, old.token, taken.token)
    assert w2.get_call(call.id).result == "the new owner's result"


def test_an_accepted_fence_commits_the_pipelined_write(open_journal):
    w1 = open_journal("w1")
    run = w1.admit("chat", "in-1", sha("x")).run
    calls = [intent(w1, run.id, seq=seq) for seq in range(8)]  # past the prepare threshold
    done = [w1.commit_result(c.id, {"seq": c.seq}) for c in calls]
    assert [d.state for d in done] == ["completed"] * 8
    assert [c.result for c in w1.list_calls(run.id)] == [{"seq": s} for s in range(8)]
