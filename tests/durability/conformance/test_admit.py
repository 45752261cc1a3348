"""Admission: idempotency on input id + digest, one open run per chat."""

from __future__ import annotations

import pytest

from durability import (
    ActiveRunExists,
    DurabilityError,
    InputConflict,
    InvalidArgument,
    NoActiveRun,
    RunHeld,
)
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


def test_admit_starts_an_active_run_at_version_1(journal):
    admission = journal.admit("chat-1", "in-1", sha("hello"))
    assert admission.created is True
    assert admission.kind == "run"
    run = admission.run
    assert (run.status, run.version, run.context_id, run.input_id) == (
        "active",
        1,
        "chat-1",
        "in-1",
    )
    assert journal.get_run(run.id) == run
    assert journal.active_run("chat-1") == run


def test_same_id_and_digest_returns_the_recorded_run(journal):
    first = journal.admit("chat-1", "in-1", sha("hello"))
    again = journal.admit("chat-1", "in-1", sha("hello"))
    assert again.created is False
    assert again.run.id == first.run.id
    assert len(journal.list_runs()) == 1


def test_same_id_different_digest_is_refused_and_changes_nothing(journal):
    first = journal.admit("chat-1", "in-1", sha("hello"))
    with pytest.raises(InputConflict) as info:
        journal.admit("chat-1", "in-1", sha("something else"))
    assert info.value.code == "input_conflict"
    assert info.value.to_dict()["run_id"] == first.run.id
    assert journal.get_run(first.run.id) == first.run


def test_same_id_and_digest_naming_another_chat_returns_the_recorded_run(journal):
    # Two racing copies of one request, each with its own freshly generated chat id: the
    # second is the same input, not a conflict, and leaves nothing in its own chat.
    first = journal.admit("chat-1", "in-1", sha("hello"))
    again = journal.admit("chat-2", "in-1", sha("hello"))
    assert again.created is False
    assert again.run.id == first.run.id and again.run.context_id == "chat-1"
    assert journal.list_runs(context_id="chat-2") == []
    assert journal.list_events(context_id="chat-2") == []
    assert journal.input_context("in-1") == "chat-1"


def test_same_id_in_another_chat_with_other_content_is_refused(journal):
    journal.admit("chat-1", "in-1", sha("hello"))
    with pytest.raises(InputConflict):
        journal.admit("chat-2", "in-1", sha("other"))
    assert journal.list_runs(context_id="chat-2") == []


def test_second_input_while_a_run_is_active_is_refused_without_a_trace(journal):
    first = journal.admit("chat-1", "in-1", sha("one"))
    with pytest.raises(ActiveRunExists) as info:
        journal.admit("chat-1", "in-2", sha("two"))
    assert info.value.code == "active_run_exists"
    assert info.value.run_id == first.run.id
    assert len(journal.list_runs()) == 1
    # No idempotency record was left: once the chat is free the same id starts a run.
    journal.set_run_status(first.run.id, "completed")
    second = journal.admit("chat-1", "in-2", sha("three"))
    assert second.created is True


def test_a_held_run_still_counts_as_active(journal):
    run = journal.admit("chat-1", "in-1", sha("one")).run
    held = journal.mark_needs_attention(run.id, "corrupt_checkpoint")
    with pytest.raises(ActiveRunExists) as info:
        journal.admit("chat-1", "in-2", sha("two"))
    assert isinstance(info.value, RunHeld)
    assert info.value.code == "run_held"
    assert info.value.version == held.version
    assert journal.active_run("chat-1").id == run.id


def test_other_chats_are_independent(journal):
    a = journal.admit("chat-a", "in-a", sha("a")).run
    b = journal.admit("chat-b", "in-b", sha("b")).run
    assert a.id != b.id
    assert {r.id for r in journal.list_runs("active")} == {a.id, b.id}


def test_intervention_joins_the_active_run_idempotently(journal):
    run = journal.admit("chat-1", "in-1", sha("one")).run
    nudge = journal.admit_intervention("chat-1", "in-2", sha("two"), message="stop that")
    assert (nudge.created, nudge.kind, nudge.run.id) == (True, "intervention", run.id)
    again = journal.admit_intervention("chat-1", "in-2", sha("two"))
    assert (again.created, again.run.id) == (False, run.id)
    with pytest.raises(InputConflict):
        journal.admit_intervention("chat-1", "in-2", sha("changed"))
    events = journal.list_events(run_id=run.id)
    assert [e.type for e in events] == ["input", "intervention"]
    assert events[1].payload["message"] == "stop that"


def test_intervention_without_an_active_run_is_refused(journal):
    with pytest.raises(NoActiveRun) as info:
        journal.admit_intervention("chat-1", "in-1", sha("x"))
    assert info.value.code == "no_active_run"
    # refused: the id is still free
    assert journal.admit("chat-1", "in-1", sha("y")).created is True


def test_intervention_on_a_held_run_is_refused(journal):
    run = journal.admit("chat-1", "in-1", sha("one")).run
    journal.mark_needs_attention(run.id, "open_intent")
    with pytest.raises(RunHeld):
        journal.admit_intervention("chat-1", "in-2", sha("two"))


@pytest.mark.parametrize(
    ("context_id", "input_id", "digest", "field"),
    [
        ("", "in-1", "a" * 64, "context_id"),
        ("chat", "", "a" * 64, "input_id"),
        ("chat", "in-1", "not-a-digest", "content_digest"),
        ("chat", "in-1", "A" * 64, "content_digest"),
        ("chat", "in\n1", "a" * 64, "input_id"),
        ("chat", "x" * 201, "a" * 64, "input_id"),
    ],
)
def test_bad_input_gets_a_clear_error(journal, context_id, input_id, digest, field):
    with pytest.raises(InvalidArgument) as info:
        journal.admit(context_id, input_id, digest)
    assert info.value.code == "invalid_argument"
    assert info.value.to_dict()["field"] == field
    assert journal.list_runs() == []


def test_unserialisable_message_is_refused(journal):
    with pytest.raises(DurabilityError) as info:
        journal.admit("chat", "in-1", sha("x"), message={"bad": object()})
    assert info.value.code == "not_serializable"
    assert journal.list_runs() == []


def test_admission_survives_reopening(backend):
    with backend.open() as first:
        run = first.admit("chat-1", "in-1", sha("hello")).run
    with backend.open() as second:
        again = second.admit("chat-1", "in-1", sha("hello"))
        assert again.created is False and again.run == run


def test_input_context_names_the_chat_an_input_went_to(journal):
    assert journal.input_context("in-x") is None
    journal.admit("chat-7", "in-x", sha("hello"))
    assert journal.input_context("in-x") == "chat-7"
    with pytest.raises(InvalidArgument):
        journal.input_context("")
