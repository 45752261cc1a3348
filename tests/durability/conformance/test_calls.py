"""Intents and results: intent before effect, results committed once, never overwritten."""

from __future__ import annotations

import pytest

from durability import (
    IntentMissing,
    InvalidArgument,
    ReplayDivergence,
    ResultConflict,
    RunNotActive,
    fingerprint,
)
from durability.records import DecisionRequest
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


@pytest.fixture
def run(journal):
    return journal.admit("chat-1", "in-1", sha("hello")).run


def intent(journal, run, seq=1, **overrides):
    values = {
        "agent_no": 0,
        "seq": seq,
        "kind": "tool",
        "name": "code_execution_tool",
        "args": {"runtime": "terminal", "code": "echo hi"},
        "policy": "hold",
    }
    values.update(overrides)
    return journal.record_intent(run.id, **values)


def test_intent_is_recorded_open_with_its_fingerprint(journal, run):
    call = intent(journal, run)
    assert call.state == "open"
    assert call.attempt == 1
    assert call.fingerprint == fingerprint(
        "tool", "code_execution_tool", {"runtime": "terminal", "code": "echo hi"}, "hold"
    )
    assert journal.open_intents(run.id) == [call]
    assert journal.get_call(call.id) == call


def test_fingerprint_is_sha256_of_canonical_json(journal):
    import hashlib
    import json

    expected = hashlib.sha256(
        json.dumps(
            {"kind": "tool", "name": "n", "args": {"b": 1, "a": "é"}, "policy": "p"},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
    ).hexdigest()
    assert fingerprint("tool", "n", {"a": "é", "b": 1}, "p") == expected


def test_same_intent_again_returns_the_recorded_call(journal, run):
    first = intent(journal, run)
    again = intent(journal, run)
    assert again.id == first.id
    assert len(journal.list_calls(run.id)) == 1


def test_result_commits_once_and_same_result_is_a_no_op(journal, run):
    call = intent(journal, run)
    done = journal.commit_result(call.id, {"output": "hi\n"})
    assert done.state == "completed"
    assert done.result == {"output": "hi\n"}
    version = journal.get_run(run.id).version
    again = journal.commit_result(call.id, {"output": "hi\n"})
    assert again == done
    assert journal.get_run(run.id).version == version
    assert journal.open_intents(run.id) == []
    # a later request for the same call reuses the result
    assert intent(journal, run) == done


def test_different_result_raises_result_conflict_and_changes_nothing(journal, run):
    call = intent(journal, run)
    done = journal.commit_result(call.id, {"output": "hi\n"})
    version = journal.get_run(run.id).version
    with pytest.raises(ResultConflict) as info:
        journal.commit_result(call.id, {"output": "bye\n"})
    assert info.value.code == "result_conflict"
    assert info.value.recorded_digest == done.result_digest
    assert journal.get_call(call.id) == done
    assert journal.get_run(run.id).version == version
    with pytest.raises(ResultConflict):
        journal.commit_result(call.id, {"output": "hi\n"}, failed=True)


def test_result_without_intent_is_refused(journal, run):
    with pytest.raises(IntentMissing) as info:
        journal.commit_result("no-such-call", {"x": 1})
    assert info.value.code == "intent_missing"
    assert journal.list_calls(run.id) == []


def test_failed_result_is_recorded_as_failed(journal, run):
    call = intent(journal, run, kind="model", name="chat", policy="hold")
    failed = journal.commit_result(call.id, {"error": "timeout"}, failed=True)
    assert failed.state == "failed"
    assert failed.has_result


def test_every_state_change_bumps_the_version(journal, run):
    versions = [journal.get_run(run.id).version]
    call = intent(journal, run)
    versions.append(journal.get_run(run.id).version)
    journal.commit_result(call.id, "ok")
    versions.append(journal.get_run(run.id).version)
    journal.mark_needs_attention(run.id, "x")
    versions.append(journal.get_run(run.id).version)
    assert versions == sorted(set(versions))


def test_divergent_intent_holds_the_run_and_runs_nothing(journal, run):
    call = intent(journal, run, seq=3)
    with pytest.raises(ReplayDivergence) as info:
        intent(journal, run, seq=3, args={"runtime": "terminal", "code": "rm -rf /"})
    assert info.value.code == "replay_divergence"
    assert info.value.seq == 3
    held = journal.get_run(run.id)
    assert held.status == "needs_attention"
    assert held.reason == "replay_divergence"
    assert held.reason_detail["seq"] == 3
    assert journal.list_calls(run.id) == [call]


def test_intent_on_a_run_that_is_not_active_is_refused(journal, run):
    journal.mark_needs_attention(run.id, "open_intent")
    with pytest.raises(RunNotActive) as info:
        intent(journal, run)
    assert info.value.code == "run_not_active"
    assert journal.list_calls(run.id) == []


def test_result_on_a_held_run_is_refused(journal, run):
    call = intent(journal, run)
    journal.mark_needs_attention(run.id, "open_intent")
    with pytest.raises(RunNotActive):
        journal.commit_result(call.id, "late")
    assert journal.get_call(call.id).state == "open"


def test_positions_are_per_agent_and_sequence(journal, run):
    a = intent(journal, run, seq=1)
    b = intent(journal, run, seq=1, agent_no=1)
    c = intent(journal, run, seq=2)
    assert len({a.id, b.id, c.id}) == 3
    assert [x.id for x in journal.open_intents(run.id)] == [a.id, b.id, c.id]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"kind": "shell"}, "kind"),
        ({"agent_no": -1}, "agent_no"),
        ({"seq": "1"}, "seq"),
        ({"name": ""}, "name"),
        ({"policy": ""}, "policy"),
        ({"seq": True}, "seq"),
    ],
)
def test_bad_intent_is_refused_with_a_field(journal, run, overrides, field):
    with pytest.raises(InvalidArgument) as info:
        intent(journal, run, **overrides)
    assert info.value.to_dict()["field"] == field


def test_unserialisable_args_are_refused(journal, run):
    with pytest.raises(InvalidArgument) as info:
        intent(journal, run, args={"x": float("nan")})
    assert info.value.code == "not_serializable"


def deep(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels):
        value = {"x": value}
    return value


@pytest.mark.parametrize(
    "result",
    [{"s": {1, 2}}, {"o": object()}, {"n": float("inf")}, "broken \ud800", deep(100_000)],
    ids=["set", "object", "inf", "lone_surrogate", "too_deep"],
)
def test_an_unstorable_result_is_refused_and_the_call_stays_open(journal, run, result):
    call = intent(journal, run)
    with pytest.raises(InvalidArgument) as info:
        journal.commit_result(call.id, result)
    assert info.value.code == "not_serializable"
    assert journal.get_call(call.id).state == "open"
    # the caller can still close it (the loop commits a result_not_storable error)
    done = journal.commit_result(call.id, {"error": "result_not_storable"}, failed=True)
    assert done.state == "failed"


@pytest.mark.parametrize("args", [{"t": "x\udfff"}, deep(100_000)], ids=["surrogate", "deep"])
def test_unstorable_args_are_refused_before_anything_is_written(journal, run, args):
    with pytest.raises(InvalidArgument) as info:
        intent(journal, run, args=args)
    assert info.value.code == "not_serializable"
    assert journal.list_calls(run.id) == []


def test_integers_past_64_bits_are_refused(journal, run):
    with pytest.raises(InvalidArgument) as info:
        intent(journal, run, seq=2**63)
    assert info.value.to_dict()["field"] == "seq"
    with pytest.raises(InvalidArgument):
        journal.decide(DecisionRequest(run.id, "stop", version=2**64, actor="t"))
    assert journal.list_calls(run.id) == []


def test_ids_that_are_not_valid_unicode_are_refused(journal):
    with pytest.raises(InvalidArgument) as info:
        journal.admit("chat-\ud800", "in-1", "a" * 64)
    assert info.value.to_dict()["field"] == "context_id"
    assert journal.list_runs() == []


def test_large_results_are_stored_whole(journal, run):
    call = intent(journal, run)
    big = {"output": "x" * (600 * 1024)}
    done = journal.commit_result(call.id, big)
    assert journal.get_call(done.id).result == big
    assert journal.commit_result(call.id, big).state == "completed"


def test_subordinate_calls_share_the_run(journal, run):
    parent = intent(
        journal,
        run,
        seq=2,
        kind="subordinate",
        name="call_subordinate",
        args={"message": "do x"},
        policy="child",
    )
    child = intent(
        journal, run, seq=1, agent_no=1, kind="model", name="chat", args={}, policy="hold"
    )
    journal.commit_result(child.id, "answer")
    journal.commit_result(parent.id, "answer")
    detail = journal.read_run(run.id)
    assert [c.id for c in detail.calls] == [parent.id, child.id]
    assert all(c.state == "completed" for c in detail.calls)


def test_list_calls_from_seq_keeps_each_agents_later_calls_in_journal_order(journal, run):
    made = []
    for agent_no, seq in [(0, 1), (1, 1), (0, 2), (1, 2), (2, 1), (0, 3), (1, 3)]:
        call = intent(journal, run, seq=seq, agent_no=agent_no)
        journal.commit_result(call.id, {"seq": seq})
        made.append(call)
    picked = journal.list_calls(run.id, from_seq={0: 2, 1: 3})
    # agent 0 from seq 2, agent 1 from seq 3, agent 2 (not named) whole
    assert [(c.agent_no, c.seq) for c in picked] == [(0, 2), (2, 1), (0, 3), (1, 3)]
    assert journal.list_calls(run.id, from_seq={}) == journal.list_calls(run.id)
    assert journal.list_calls(run.id, from_seq={0: 99, 1: 99, 2: 99}) == []
    assert [c.id for c in journal.list_calls(run.id)] == [c.id for c in made]


async def test_list_calls_from_seq_through_the_async_facade(journal, run):
    for seq in (1, 2, 3):
        intent(journal, run, seq=seq)
    picked = await journal.aio.list_calls(run.id, from_seq={0: 3})
    assert [c.seq for c in picked] == [3]
