"""Retry grants, content-addressed blobs and the event log."""

from __future__ import annotations

import hashlib

import pytest

from durability import BlobNotFound, InvalidArgument, InvalidTransition
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


@pytest.fixture
def run(journal):
    return journal.admit("chat-1", "in-1", sha("hello")).run


def test_grants_are_consumed_one_attempt_at_a_time(journal, run):
    assert journal.consume_retry(run.id) is False
    grant = journal.grant_retries(run.id, 2, actor="alice")
    assert (grant.attempts, grant.remaining) == (2, 2)
    assert [journal.consume_retry(run.id) for _ in range(3)] == [True, True, False]
    assert journal.list_retry_grants(run.id)[0].remaining == 0


def test_consuming_a_retry_for_a_failed_call_makes_the_next_intent_attempt_2(journal, run):
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="model", name="chat", args={}, policy="hold"
    )
    journal.commit_result(call.id, {"error": "502"}, failed=True)
    assert journal.consume_retry(run.id, call_id=call.id) is False  # no grant: still failed
    assert journal.get_call(call.id).state == "failed"
    journal.grant_retries(run.id, 1, actor="alice")
    assert journal.consume_retry(run.id, call_id=call.id) is True
    retry = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="model", name="chat", args={}, policy="hold"
    )
    assert retry.attempt == 2 and retry.state == "open"


def test_only_failed_calls_can_be_retried(journal, run):
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="model", name="chat", args={}, policy="hold"
    )
    journal.grant_retries(run.id, 1, actor="alice")
    with pytest.raises(InvalidTransition):
        journal.consume_retry(run.id, call_id=call.id)
    assert journal.list_retry_grants(run.id)[0].remaining == 1


@pytest.mark.parametrize("attempts", [0, -1, 101, "2"])
def test_grant_attempts_are_bounded(journal, run, attempts):
    with pytest.raises(InvalidArgument):
        journal.grant_retries(run.id, attempts, actor="alice")


def test_blobs_are_content_addressed_and_stored_once(journal):
    data = b"\x00\x01binary\xff"
    h = journal.put_blob(data)
    assert h == hashlib.sha256(data).hexdigest()
    assert journal.put_blob(data) == h
    assert journal.get_blob(h) == data
    with pytest.raises(BlobNotFound) as info:
        journal.get_blob("0" * 64)
    assert info.value.code == "blob_not_found"
    with pytest.raises(InvalidArgument):
        journal.get_blob("xyz")


def test_events_append_in_order(journal, run):
    e1 = journal.append_event("chat-1", "log", {"text": "one"}, run_id=run.id)
    e2 = journal.append_event("chat-1", "log", {"text": "two"})
    assert e2.id > e1.id
    assert [
        e.payload
        for e in journal.list_events(context_id="chat-1", after_id=e1.id - 1)
        if e.type == "log"
    ] == [{"text": "one"}, {"text": "two"}]
    assert [e.id for e in journal.list_events(context_id="chat-1", after_id=e1.id)] == [e2.id]
    assert journal.list_events(context_id="other") == []
