"""Decisions that fit the hold (#23): retry_model_call, the refused resume, standing grants
and their uses, the history of decided runs; on every backend."""

from __future__ import annotations

import pytest

from durability import DecisionNotApplicable, InvalidArgument, ReplayDivergence, StaleVersion
from durability.decision_fit import RETRY_MODEL_CALL, fitting
from durability.records import DecisionRequest
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


def _model_call(journal, run_id: str, seq: int = 0, messages: str = "m1"):
    return journal.record_intent(
        run_id,
        agent_no=0,
        seq=seq,
        kind="model",
        name="model",
        args={"messages_digest": messages},
        policy="hold",
    )


@pytest.fixture
def model_failed(journal):
    run = journal.admit("chat-1", "in-1", sha("hi")).run
    call = _model_call(journal, run.id)
    journal.commit_result(call.id, {"error": "model_error", "status": 500}, failed=True)
    run = journal.mark_needs_attention(run.id, "model_failed", {"call_id": call.id})
    return run, call


def _allowed(journal, run_id: str) -> set[str]:
    detail = journal.read_run(run_id)
    return {f.decision for f in fitting(detail.run, detail.calls) if f.allowed}


def test_a_model_failure_fits_retry_and_stop_only_and_resume_is_refused(journal, model_failed):
    run, _call = model_failed
    assert _allowed(journal, run.id) == {RETRY_MODEL_CALL, "stop"}
    with pytest.raises(DecisionNotApplicable) as info:
        journal.decide(DecisionRequest(run.id, "resume", version=run.version, actor="alice"))
    assert info.value.code == "decision_not_applicable"
    assert "fail again" in info.value.message
    assert journal.get_run(run.id).status == "needs_attention"


def test_retry_model_call_grants_supersedes_and_reactivates_once(journal, model_failed):
    run, _call = model_failed
    outcome = journal.decide(
        DecisionRequest(
            run.id, RETRY_MODEL_CALL, attempts=2, version=run.version, actor="alice", note="up"
        )
    )
    assert outcome.applied and outcome.run.status == "active"
    assert outcome.decision.decision == RETRY_MODEL_CALL and outcome.decision.note == "up"
    again = journal.decide(
        DecisionRequest(run.id, RETRY_MODEL_CALL, attempts=2, version=run.version, actor="alice")
    )
    assert not again.applied  # the same decision on the same version applies once
    assert [(c.attempt, c.state) for c in journal.list_calls(run.id)] == [(1, "superseded")]
    assert [g.remaining for g in journal.list_retry_grants(run.id)] == [1]
    # the next intent at the position is attempt 2, even with other messages
    retried = _model_call(journal, run.id, messages="m2")
    assert (retried.seq, retried.attempt, retried.state) == (0, 2, "open")
    with pytest.raises(StaleVersion):
        journal.decide(
            DecisionRequest(
                run.id, RETRY_MODEL_CALL, attempts=1, version=run.version + 50, actor="bob"
            )
        )


def test_retry_model_call_needs_a_held_model_call(journal):
    run = journal.admit("chat-1", "in-1", sha("x")).run
    call = journal.record_intent(
        run.id, agent_no=0, seq=0, kind="tool", name="shell", args={}, policy="hold"
    )
    run = journal.mark_needs_attention(run.id, "uncertain_call", {"call_id": call.id})
    assert RETRY_MODEL_CALL not in _allowed(journal, run.id)
    assert "new_attempt" in _allowed(journal, run.id)
    with pytest.raises(DecisionNotApplicable):
        journal.decide(
            DecisionRequest(
                run.id, RETRY_MODEL_CALL, attempts=1, version=run.version, actor="alice"
            )
        )


def test_a_divergence_at_a_model_call_is_retried_with_new_messages(journal):
    run = journal.admit("chat-1", "in-1", sha("x")).run
    call = _model_call(journal, run.id, messages="before")
    journal.commit_result(call.id, {"error": "model_error"}, failed=True)
    with pytest.raises(ReplayDivergence):  # another fingerprint at the position: held
        _model_call(journal, run.id, messages="after")
    run = journal.get_run(run.id)
    assert run.reason == "replay_divergence"
    assert _allowed(journal, run.id) == {RETRY_MODEL_CALL, "stop"}
    journal.decide(
        DecisionRequest(run.id, RETRY_MODEL_CALL, attempts=1, version=run.version, actor="alice")
    )
    assert _model_call(journal, run.id, messages="after").attempt == 2


def test_standing_grants_pay_per_run_and_record_each_use(journal):
    with pytest.raises(InvalidArgument):
        journal.grant_standing("planet", "x", 1, actor="alice")
    journal.grant_standing("task", "task-1", 1, actor="alice", note="nightly report")
    scopes = [("chat", "chat-1"), ("task", "task-1")]
    run = journal.admit("chat-1", "in-1", sha("x")).run
    first = _model_call(journal, run.id)
    assert journal.use_standing_grant(run.id, first.id, scopes)
    second = _model_call(journal, run.id)
    assert second.attempt == 2
    assert not journal.use_standing_grant(run.id, second.id, scopes)  # one per run
    uses = journal.standing_grant_uses(run.id)
    assert [(u.call_id, g.actor, g.note, g.scope) for u, g in uses] == [
        (first.id, "alice", "nightly report", "task")
    ]
    # a failed call asks for a retry: the standing grant pays it in another run
    journal.commit_result(second.id, {"error": "x"}, failed=True)
    journal.set_run_status(run.id, "failed")
    other = journal.admit("chat-1", "in-2", sha("y")).run
    failed = _model_call(journal, other.id)
    journal.commit_result(failed.id, {"error": "x"}, failed=True)
    assert journal.consume_retry(other.id, call_id=failed.id, scopes=scopes)
    assert journal.standing_grant_for(other.id, scopes) is None  # used up for this run
    again = _model_call(journal, other.id)
    journal.commit_result(again.id, {"error": "x"}, failed=True)
    assert not journal.consume_retry(other.id, call_id=again.id, scopes=scopes)
    # withdrawn: attempts 0 is the grant in force
    third = journal.admit("chat-2", "in-3", sha("z")).run
    assert journal.standing_grant_for(third.id, scopes) is not None
    journal.grant_standing("task", "task-1", 0, actor="bob")
    assert journal.standing_grant_for(third.id, scopes) is None
    assert [g.attempts for g in journal.standing_grants()] == [0, 1]


def test_decided_runs_lists_the_most_recently_decided_first(journal, model_failed):
    run, _call = model_failed
    assert journal.decided_runs() == []
    journal.decide(DecisionRequest(run.id, "stop", version=run.version, actor="alice"))
    assert journal.decided_runs() == [run.id]
