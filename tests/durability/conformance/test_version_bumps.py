"""Versions: every state change bumps the run's version by one, whatever the storage does."""

from __future__ import annotations

import pytest

from durability import CheckpointData, StaleVersion
from durability.records import DecisionRequest
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


def test_each_intent_result_and_checkpoint_bumps_the_version_once(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    assert run.version == 1
    call = journal.record_intent(
        run.id, agent_no=0, seq=0, kind="tool", name="t", args={}, policy="never"
    )
    assert journal.get_run(run.id).version == 2
    journal.commit_result(call.id, {"ok": True}, checkpoint=CheckpointData({}, {"0": ["a"]}))
    assert journal.get_run(run.id).version == 3
    journal.write_checkpoint(run.id, CheckpointData({}, {"0": ["a", "b"]}))
    after = journal.get_run(run.id)
    assert after.version == 4 and after.updated_at >= run.updated_at
    assert after.status == "active" and after.reason is None


def test_a_bump_after_a_hold_and_resume_keeps_the_other_columns(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    held = journal.mark_needs_attention(run.id, "open_intent", {"why": "test"})
    resumed = journal.decide(
        DecisionRequest(run.id, "resume", version=held.version, actor="me")
    ).run
    journal.record_intent(run.id, agent_no=0, seq=0, kind="tool", name="t", args={}, policy="p")
    now = journal.get_run(run.id)
    assert now.version == resumed.version + 1
    assert (now.status, now.reason, now.reason_detail) == (
        resumed.status,
        resumed.reason,
        resumed.reason_detail,
    )
    assert [r.id for r in journal.list_runs("active")] == [run.id]
    with pytest.raises(StaleVersion):
        journal.decide(DecisionRequest(run.id, "stop", version=resumed.version, actor="me"))


def test_status_listings_follow_bumped_runs(journal):
    a = journal.admit("a", "in-a", sha("a")).run
    b = journal.admit("b", "in-b", sha("b")).run
    journal.record_intent(a.id, agent_no=0, seq=0, kind="model", name="m", args={}, policy="p")
    journal.mark_needs_attention(a.id, "open_intent")
    journal.write_checkpoint(b.id, CheckpointData({}, {}))
    journal.set_run_status(b.id, "completed")
    assert [r.id for r in journal.list_runs("needs_attention")] == [a.id]
    assert [r.id for r in journal.list_runs("completed")] == [b.id]
    assert journal.active_run("a").id == a.id and journal.active_run("b") is None
