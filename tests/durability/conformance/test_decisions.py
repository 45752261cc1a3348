"""The five decisions on a held run, versions, notes and idempotency."""

from __future__ import annotations

import pytest

from durability import (
    InvalidArgument,
    InvalidTransition,
    NoOpenCall,
    NoteRequired,
    RunNotHeld,
    StaleVersion,
)
from durability.records import DecisionRequest
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit

ARGS = {"code": "curl -X POST https://pay.example/charge"}


@pytest.fixture
def held(journal):
    """A run whose tool call has an intent but no result, held for a person."""
    run = journal.admit("chat-1", "in-1", sha("pay")).run
    call = journal.record_intent(
        run.id,
        agent_no=0,
        seq=1,
        kind="tool",
        name="code_execution_tool",
        args=ARGS,
        policy="hold",
    )
    run = journal.mark_needs_attention(run.id, "open_intent", {"call_id": call.id})
    return run, call


def test_resume_abandons_the_uncertain_call_and_reactivates(journal, held):
    run, call = held
    outcome = journal.decide(DecisionRequest(run.id, "resume", version=run.version, actor="alice"))
    assert outcome.applied is True
    assert outcome.run.status == "active"
    assert outcome.run.version == run.version + 1
    assert outcome.run.reason is None
    assert outcome.decision.call_id == call.id
    assert journal.get_call(call.id).state == "abandoned"
    # asking for the call again returns the abandoned record: nothing runs blindly
    again = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="tool", name="code_execution_tool", args=ARGS, policy="hold"
    )
    assert (again.id, again.state) == (call.id, "abandoned")


def test_stop_ends_the_run(journal, held):
    run, call = held
    outcome = journal.decide(DecisionRequest(run.id, "stop", version=run.version, actor="alice"))
    assert outcome.run.status == "stopped"
    assert journal.get_call(call.id).state == "abandoned"
    assert journal.active_run("chat-1") is None


def test_stop_works_on_an_active_run_too(journal):
    run = journal.admit("chat-1", "in-1", sha("x")).run
    assert (
        journal.decide(DecisionRequest(run.id, "stop", version=run.version, actor="a")).run.status
        == "stopped"
    )


def test_new_attempt_runs_the_step_again_as_attempt_2(journal, held):
    run, call = held
    journal.decide(DecisionRequest(run.id, "new_attempt", version=run.version, actor="alice"))
    assert journal.get_call(call.id).state == "superseded"
    retry = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="tool", name="code_execution_tool", args=ARGS, policy="hold"
    )
    assert retry.id != call.id
    assert (retry.attempt, retry.state) == (2, "open")


def test_confirmed_completed_records_the_note_as_the_result(journal, held):
    run, call = held
    journal.decide(
        DecisionRequest(
            run.id,
            "confirmed_completed",
            version=run.version,
            actor="alice",
            note="charge ch_123 is in the dashboard",
        ),
    )
    done = journal.get_call(call.id)
    assert done.state == "completed"
    assert done.result["note"] == "charge ch_123 is in the dashboard"
    assert done.result["actor"] == "alice"
    reused = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="tool", name="code_execution_tool", args=ARGS, policy="hold"
    )
    assert reused.id == call.id and reused.state == "completed"


def test_confirmed_not_completed_lets_the_step_run_for_real(journal, held):
    run, call = held
    journal.decide(
        DecisionRequest(
            run.id,
            "confirmed_not_completed",
            version=run.version,
            actor="alice",
            note="no charge in the dashboard",
        ),
    )
    assert journal.get_call(call.id).state == "not_completed"
    first_real = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="tool", name="code_execution_tool", args=ARGS, policy="hold"
    )
    assert first_real.id != call.id and first_real.state == "open"


@pytest.mark.parametrize("decision", ["confirmed_completed", "confirmed_not_completed"])
@pytest.mark.parametrize("note", [None, "", "   "])
def test_confirmations_need_a_note(journal, held, decision, note):
    run, _ = held
    with pytest.raises(NoteRequired) as info:
        journal.decide(
            DecisionRequest(run.id, decision, version=run.version, actor="alice", note=note)
        )
    assert info.value.code == "note_required"
    assert journal.get_run(run.id) == run
    assert journal.list_decisions(run.id) == []


def test_decision_on_an_old_version_is_refused(journal, held):
    run, _ = held
    journal.decide(DecisionRequest(run.id, "resume", version=run.version, actor="alice"))
    with pytest.raises(StaleVersion) as info:
        journal.decide(DecisionRequest(run.id, "stop", version=run.version, actor="bob"))
    assert info.value.code == "stale_version"
    assert info.value.current_version == run.version + 1
    assert journal.get_run(run.id).status == "active"


def test_decision_on_a_future_version_is_refused(journal, held):
    run, _ = held
    with pytest.raises(StaleVersion):
        journal.decide(DecisionRequest(run.id, "resume", version=run.version + 5, actor="alice"))


def test_identical_decision_on_the_same_version_applies_once(journal, held):
    run, _ = held
    first = journal.decide(
        DecisionRequest(run.id, "new_attempt", version=run.version, actor="alice")
    )
    second = journal.decide(
        DecisionRequest(run.id, "new_attempt", version=run.version, actor="alice")
    )
    assert first.applied is True and second.applied is False
    assert second.decision == first.decision
    assert journal.get_run(run.id).version == run.version + 1
    assert len(journal.list_decisions(run.id)) == 1


def test_decisions_are_journaled_with_actor_note_and_time(journal, held):
    run, call = held
    journal.decide(
        DecisionRequest(
            run.id, "confirmed_not_completed", version=run.version, actor="alice", note="checked"
        )
    )
    [decision] = journal.list_decisions(run.id)
    assert (decision.decision, decision.actor, decision.note, decision.version) == (
        "confirmed_not_completed",
        "alice",
        "checked",
        run.version,
    )
    assert decision.call_id == call.id
    assert decision.created_at > 0
    assert journal.read_run(run.id).decisions == [decision]


def test_resume_needs_a_held_run(journal):
    run = journal.admit("chat-1", "in-1", sha("x")).run
    with pytest.raises(RunNotHeld) as info:
        journal.decide(DecisionRequest(run.id, "resume", version=run.version, actor="alice"))
    assert info.value.code == "run_not_held"


def test_new_attempt_needs_an_uncertain_call(journal):
    run = journal.admit("chat-1", "in-1", sha("x")).run
    run = journal.mark_needs_attention(run.id, "corrupt_checkpoint")
    with pytest.raises(NoOpenCall):
        journal.decide(DecisionRequest(run.id, "new_attempt", version=run.version, actor="alice"))
    # resume is possible without a call
    assert (
        journal.decide(DecisionRequest(run.id, "resume", version=run.version, actor="a")).run.status
        == "active"
    )


def test_stop_on_a_finished_run_is_refused(journal):
    run = journal.admit("chat-1", "in-1", sha("x")).run
    run = journal.set_run_status(run.id, "completed")
    with pytest.raises(InvalidTransition):
        journal.decide(DecisionRequest(run.id, "stop", version=run.version, actor="alice"))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"decision": "retry"}, "decision"),
        ({"version": 0}, "version"),
        ({"actor": ""}, "actor"),
    ],
)
def test_bad_decisions_are_refused(journal, held, kwargs, field):
    run, _ = held
    values = {"decision": "resume", "version": run.version, "actor": "alice"} | kwargs
    decision = values.pop("decision")
    with pytest.raises(InvalidArgument) as info:
        journal.decide(DecisionRequest(run.id, decision, **values))
    assert info.value.to_dict()["field"] == field


def test_held_run_version_is_stable_until_someone_acts(journal, held):
    run, _ = held
    again = journal.mark_needs_attention(run.id, "open_intent")
    assert again.version == run.version
