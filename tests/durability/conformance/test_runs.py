"""Run lifecycle, listings and the reads a recovery scan needs."""

from __future__ import annotations

import pytest

from durability import InvalidArgument, InvalidTransition, OpenIntents, RunNotFound
from durability.records import DecisionRequest
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


def start(journal, chat):
    return journal.admit(chat, f"in-{chat}", sha(chat)).run


def test_list_runs_by_status_and_nonterminal(journal):
    a, b, c = start(journal, "a"), start(journal, "b"), start(journal, "c")
    journal.set_run_status(a.id, "completed")
    journal.mark_needs_attention(b.id, "open_intent")
    assert [r.id for r in journal.list_runs("completed")] == [a.id]
    assert [r.id for r in journal.list_runs("needs_attention")] == [b.id]
    assert {r.id for r in journal.list_nonterminal_runs()} == {b.id, c.id}
    assert {r.id for r in journal.list_runs(["completed", "active"])} == {a.id, c.id}
    assert len(journal.list_runs()) == 3
    assert len(journal.list_runs(limit=2)) == 2


def test_unknown_status_is_refused(journal):
    with pytest.raises(InvalidArgument):
        journal.list_runs("running")
    run = start(journal, "a")
    with pytest.raises(InvalidArgument):
        journal.set_run_status(run.id, "done")


def test_unknown_run_is_not_found(journal):
    with pytest.raises(RunNotFound) as info:
        journal.get_run("nope")
    assert info.value.code == "run_not_found"


def test_mark_needs_attention_records_the_reason_and_bumps(journal):
    run = start(journal, "a")
    held = journal.mark_needs_attention(run.id, "corrupt_checkpoint", {"checkpoint_id": 4})
    assert held.status == "needs_attention"
    assert held.reason == "corrupt_checkpoint"
    assert held.reason_detail == {"checkpoint_id": 4}
    assert held.version == run.version + 1


def test_terminal_runs_do_not_change(journal):
    run = start(journal, "a")
    done = journal.set_run_status(run.id, "failed", reason="model_error")
    assert done.reason == "model_error"
    for status in ("active", "completed", "needs_attention"):
        with pytest.raises(InvalidTransition) as info:
            journal.set_run_status(run.id, status)
        assert info.value.code == "invalid_transition"
    assert journal.set_run_status(run.id, "failed") == done  # same status: no-op


def test_held_run_reactivates_only_by_decision(journal):
    run = start(journal, "a")
    journal.mark_needs_attention(run.id, "open_intent")
    with pytest.raises(InvalidTransition):
        journal.set_run_status(run.id, "active")
    assert journal.set_run_status(run.id, "failed").status == "failed"


@pytest.mark.parametrize("status", ["completed", "failed", "stopped"])
@pytest.mark.parametrize("held", [False, True])
def test_ending_a_run_with_an_open_intent_is_refused(journal, status, held):
    run = start(journal, "a")
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="model", name="chat", args={}, policy="hold"
    )
    if held:
        journal.mark_needs_attention(run.id, "uncertain_call")
    before = journal.get_run(run.id)
    with pytest.raises(OpenIntents) as info:
        journal.set_run_status(run.id, status)
    assert info.value.code == "open_intents"
    assert info.value.fields["call_ids"] == [call.id]
    assert info.value.fields["wanted"] == status
    assert journal.get_run(run.id) == before  # nothing changed
    assert journal.get_call(call.id).state == "open"


def test_the_stop_decision_ends_a_run_with_open_intents_by_abandoning_them(journal):
    run = start(journal, "a")
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="model", name="chat", args={}, policy="hold"
    )
    version = journal.get_run(run.id).version
    outcome = journal.decide(DecisionRequest(run.id, "stop", version=version, actor="user:stop"))
    assert outcome.run.status == "stopped"
    assert journal.get_call(call.id).state == "abandoned"
    assert journal.open_intents(run.id) == []


def test_a_run_ends_once_its_intents_have_results(journal):
    run = start(journal, "a")
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="model", name="chat", args={}, policy="hold"
    )
    journal.commit_result(call.id, "error", failed=True)
    assert journal.set_run_status(run.id, "failed").status == "failed"


def test_recovery_attempts_are_counted(journal):
    run = start(journal, "a")
    once = journal.note_recovery_attempt(run.id)
    twice = journal.note_recovery_attempt(run.id)
    assert (once.recovery_attempts, twice.recovery_attempts) == (1, 2)
    assert twice.version == run.version + 2


def test_delete_run_removes_it_with_its_input_id(journal):
    run = start(journal, "a")
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="model", name="chat", args={}, policy="hold"
    )
    with pytest.raises(InvalidTransition):
        journal.delete_run(run.id)
    journal.commit_result(call.id, "hi")
    journal.set_run_status(run.id, "completed")
    journal.delete_run(run.id)
    with pytest.raises(RunNotFound):
        journal.get_run(run.id)
    assert journal.list_calls(run.id) == []
    assert journal.list_events(run_id=run.id) == []
    # the input id went with it
    assert journal.admit("a", "in-a", sha("other")).created is True


def test_read_run_returns_run_calls_and_decisions(journal):
    run = start(journal, "a")
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="model", name="chat", args={"m": 1}, policy="hold"
    )
    detail = journal.read_run(run.id)
    assert detail.run.id == run.id
    assert detail.calls == [call]
    assert detail.decisions == []
    assert detail.to_dict()["calls"][0]["id"] == call.id


def test_contexts_with_runs_names_the_chats_that_still_have_one(journal):
    first = journal.admit("chat-a", "in-a", sha("a")).run
    journal.admit("chat-b", "in-b", sha("b"))
    assert journal.contexts_with_runs(["chat-a", "chat-b", "chat-c"]) == {"chat-a", "chat-b"}
    journal.set_run_status(first.id, "completed")
    journal.delete_run(first.id)
    assert journal.contexts_with_runs(["chat-a", "chat-b"]) == {"chat-b"}
    assert journal.contexts_with_runs([]) == set()


def test_finish_run_ends_the_run_with_its_event_in_one_write(journal):
    run = start(journal, "a")
    before = journal.store.batches if hasattr(journal.store, "batches") else None
    done = journal.finish_run(
        run.id, "completed", context_id="a", event_type="run_result", payload={"response": "ok"}
    )
    assert done.status == "completed" and done.version == run.version + 1
    events = journal.list_events(run_id=run.id)
    assert [(e.type, e.payload) for e in events][-1] == ("run_result", {"response": "ok"})
    if before is not None:  # SQLite's writer counts its transactions
        assert journal.store.batches == before + 1


def test_finish_run_with_an_open_call_writes_nothing(journal):
    run = start(journal, "a")
    journal.record_intent(run.id, agent_no=0, seq=0, kind="tool", name="t", args={}, policy="hold")
    events = len(journal.list_events(run_id=run.id))
    with pytest.raises(OpenIntents):
        journal.finish_run(run.id, "completed", context_id="a", event_type="run_result")
    assert journal.get_run(run.id).status == "active"
    assert len(journal.list_events(run_id=run.id)) == events  # no answer without the end
    with pytest.raises(InvalidArgument):  # only a final status ends a run
        journal.finish_run(run.id, "needs_attention", context_id="a", event_type="run_result")
