"""Damaged records: every stored value is checked against its digest before it is used.

A value changed behind the journal's back (still valid JSON) or one that cannot be decoded
is never handed back: reading it raises ``corrupt_record`` naming the record, and a journal
write that meets one at a call's position holds the run. Listings still work.
"""

from __future__ import annotations

import pytest

from durability import CorruptRecord, DocumentConflict, digest
from durability.integrity import Undecodable, call_damages, event_damage
from durability.records import DecisionRequest
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit

MODEL_ARGS = {"provider": "p", "model": "m", "messages_digest": "d"}


@pytest.fixture
def run(journal):
    return journal.admit("chat-1", "in-1", sha("hello"), message={"message": "hello"}).run


def committed(journal, run, seq=0, result=None):
    call = journal.record_intent(
        run.id, agent_no=0, seq=seq, kind="model", name="model", args=MODEL_ARGS, policy="hold"
    )
    return journal.commit_result(call.id, result or {"response": "the real answer"})


def ask_again(journal, run, seq=0):
    return journal.record_intent(
        run.id, agent_no=0, seq=seq, kind="model", name="model", args=MODEL_ARGS, policy="hold"
    )


# events ----------------------------------------------------------------------------------
def test_events_carry_the_digest_of_their_payload(journal, run):
    event = journal.append_event("chat-1", "note", {"n": 1}, run_id=run.id)
    assert event.digest == digest({"n": 1})
    listed = journal.list_events(run_id=run.id)
    assert [e.type for e in listed] == ["input", "note"]
    assert listed[0].digest == digest(listed[0].payload)
    assert listed[1] == event
    assert all(event_damage(e) is None for e in listed)


@pytest.mark.parametrize(
    ("stored", "reason"), [('{"n":2}', "digest_mismatch"), ('{"n":', "undecodable")]
)
def test_a_damaged_event_payload_is_refused(backend, journal, run, stored, reason):
    event = journal.append_event("chat-1", "note", {"n": 1}, run_id=run.id)
    backend.overwrite("events", "payload", stored, "id", event.id)
    with pytest.raises(CorruptRecord) as info:
        journal.list_events(run_id=run.id)
    fields = info.value.fields
    assert (fields["record"], fields["reason"]) == ("event", reason)
    assert (fields["event_id"], fields["event_type"], fields["run_id"]) == (
        event.id,
        "note",
        run.id,
    )
    assert info.value.code == "corrupt_record"
    shown = journal.list_events(run_id=run.id, verify=False)  # listings still work
    assert shown[-1].id == event.id
    if reason == "undecodable":
        assert isinstance(shown[-1].payload, Undecodable)


def test_an_event_without_its_digest_is_refused(backend, journal, run):
    event = journal.append_event("chat-1", "note", {"n": 1}, run_id=run.id)
    backend.overwrite("events", "digest", None, "id", event.id)
    with pytest.raises(CorruptRecord) as info:
        journal.list_events(run_id=run.id)
    assert info.value.fields["reason"] == "digest_missing"


# call results and arguments -----------------------------------------------------------
@pytest.mark.parametrize(
    ("stored", "reason"),
    [('{"response":"a forged answer"}', "digest_mismatch"), ('{"response":"the re', "undecodable")],
)
def test_a_damaged_result_is_never_reused_and_holds_the_run(backend, journal, run, stored, reason):
    call = committed(journal, run)
    backend.overwrite("calls", "result", stored, "id", call.id)
    listed = journal.list_calls(run.id)  # reading the run never fails
    assert [d.reason for d in call_damages(listed[0])] == [reason]
    before = journal.get_run(run.id)

    with pytest.raises(CorruptRecord) as info:
        ask_again(journal, run)
    fields = info.value.fields
    assert fields["record"] == "call_result" and fields["reason"] == reason
    assert (fields["run_id"], fields["call_id"], fields["agent_no"], fields["seq"]) == (
        run.id,
        call.id,
        0,
        0,
    )
    held = journal.get_run(run.id)
    assert (held.status, held.reason) == ("needs_attention", "corrupt_record")
    assert held.reason_detail == fields and held.version == before.version + 1
    assert journal.read_run(run.id).calls[0].id == call.id


def test_a_missing_result_digest_is_damage(backend, journal, run):
    call = committed(journal, run)
    backend.overwrite("calls", "result_digest", None, "id", call.id)
    with pytest.raises(CorruptRecord) as info:
        ask_again(journal, run)
    assert info.value.fields["reason"] == "digest_missing"


def test_changed_arguments_of_a_committed_call_are_not_handed_back(backend, journal, run):
    call = committed(journal, run)
    backend.overwrite("calls", "args", '{"model":"forged"}', "id", call.id)
    assert [d.record for d in call_damages(journal.get_call(call.id))] == ["call_args"]
    again = ask_again(journal, run)  # the caller's arguments match the fingerprint
    assert again.id == call.id and again.args == MODEL_ARGS
    assert again.result == {"response": "the real answer"}
    assert journal.get_run(run.id).status == "active"


def test_a_large_result_whose_blob_is_gone_is_damage(backend, journal, run):
    big = {"response": "x" * 300_000}
    call = committed(journal, run, result=big)
    blob = journal.read_run(run.id).calls[0]
    assert blob.result == big
    from durability.canonical import canonical_json, digest_text

    backend.corrupt_blob(digest_text(canonical_json(big)), b'{"response":"short"}')
    with pytest.raises(CorruptRecord) as info:
        ask_again(journal, run)
    assert info.value.fields["call_id"] == call.id


# documents ------------------------------------------------------------------------------
def test_a_damaged_document_is_refused_and_can_be_replaced_whole(backend, journal):
    plan = {"title": "t", "items": [{"id": "a", "text": "one", "done": False}]}
    journal.replace_document("chat-1", "plan", plan, expected_revision=0, actor="alice")
    backend.overwrite("documents", "body", '{"title":"forged","items":[]}', "context_id", "chat-1")
    with pytest.raises(CorruptRecord) as info:
        journal.read_document("chat-1", "plan")
    fields = info.value.fields
    assert (fields["record"], fields["reason"], fields["context_id"], fields["kind"]) == (
        "document",
        "digest_mismatch",
        "chat-1",
        "plan",
    )
    assert fields["revision"] == 1
    with pytest.raises(DocumentConflict):  # a stale revision is still a conflict
        journal.replace_document("chat-1", "plan", plan, expected_revision=0, actor="bob")
    repaired = journal.replace_document("chat-1", "plan", plan, expected_revision=1, actor="bob")
    assert (repaired.revision, repaired.value) == (2, plan)
    assert journal.read_document("chat-1", "plan").value == plan


# decisions on a run held for a damaged record ---------------------------------------
def held_on_damaged_result(backend, journal, run):
    call = committed(journal, run)
    backend.overwrite("calls", "result", '{"response":"forged"}', "id", call.id)
    with pytest.raises(CorruptRecord):
        ask_again(journal, run)
    return call, journal.get_run(run.id)


@pytest.mark.parametrize(
    ("decision", "note", "call_state", "run_status"),
    [
        ("resume", None, "abandoned", "active"),
        ("stop", None, "completed", "stopped"),
        ("new_attempt", None, "superseded", "active"),
        ("confirmed_completed", "I saw the reply", "completed", "active"),
        ("confirmed_not_completed", "it never ran", "not_completed", "active"),
    ],
)
def test_every_decision_works_on_a_run_held_for_a_damaged_result(
    backend, journal, run, decision, note, call_state, run_status
):
    call, held = held_on_damaged_result(backend, journal, run)
    outcome = journal.decide(
        DecisionRequest(run.id, decision, version=held.version, actor="alice", note=note)
    )
    assert outcome.applied and outcome.run.status == run_status
    assert outcome.decision.call_id == call.id
    decided = journal.get_call(call.id)
    assert decided.state == call_state
    if decision == "stop":
        return  # the run ended; the damaged row stays as evidence
    assert [d.record for d in call_damages(decided)] == []  # the damaged value is gone
    nxt = ask_again(journal, run)
    if decision == "resume":
        assert (nxt.id, nxt.state) == (call.id, "abandoned")
    elif decision == "confirmed_completed":
        assert nxt.result["note"] == "I saw the reply" and nxt.state == "completed"
    else:
        assert (nxt.attempt, nxt.state) == (2, "open")


def test_a_decision_may_name_the_damaged_call(backend, journal, run):
    call, held = held_on_damaged_result(backend, journal, run)
    outcome = journal.decide(
        DecisionRequest(run.id, "new_attempt", version=held.version, actor="alice", call_id=call.id)
    )
    assert outcome.decision.call_id == call.id


# verify_records --------------------------------------------------------------------------
def test_verify_records_lists_every_damaged_record(backend, journal, run):
    call = committed(journal, run)
    second = committed(journal, run, seq=1)
    event = journal.append_event("chat-1", "note", {"n": 1}, run_id=run.id)
    plan = {"title": "t", "items": []}
    journal.replace_document("chat-1", "plan", plan, expected_revision=0, actor="alice")
    clean = journal.verify_records()
    assert clean.ok and clean.checked["calls"] == 2 and clean.checked["events"] == 2
    assert clean.checked["documents"] == 1

    backend.overwrite("calls", "result", '{"response":"forged"}', "id", call.id)
    backend.overwrite("calls", "args", "{", "id", second.id)
    backend.overwrite("events", "payload", '{"n":2}', "id", event.id)
    backend.overwrite("documents", "body", "[]", "context_id", "chat-1")
    report = journal.verify_records()
    found = sorted((d.record, d.reason) for d in report.damages)
    assert found == [
        ("call_args", "undecodable"),
        ("call_result", "digest_mismatch"),
        ("document", "digest_mismatch"),
        ("event", "digest_mismatch"),
    ]
    assert {d.ids.get("call_id") for d in report.damages} >= {call.id, second.id}
