"""Checkpoints: round trip, chat-level rebuild, corruption detection."""

from __future__ import annotations

import json

import pytest

from durability import (
    CheckpointData,
    CorruptCheckpoint,
    InvalidArgument,
    RunNotActive,
    history_write,
)
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


def msg(i, role="user"):
    return {"role": role, "content": f"message {i}", "meta": {"n": i}}


@pytest.fixture
def run(journal):
    return journal.admit("chat-1", "in-1", sha("hello")).run


def test_checkpoint_round_trip(journal, run):
    data = CheckpointData(
        state={"iteration": 3, "plan_revision": 2},
        histories={"0": [msg(1), msg(2, "assistant")], "1": [msg(9)]},
        seq=7,
    )
    ref = journal.write_checkpoint(run.id, data)
    assert ref.history_lengths == {"0": 2, "1": 1}
    cp = journal.latest_checkpoint(run.id)
    assert cp.id == ref.id and cp.digest == ref.digest and cp.seq == 7
    assert cp.state == {"iteration": 3, "plan_revision": 2}
    assert cp.histories == {"0": [msg(1), msg(2, "assistant")], "1": [msg(9)]}


def test_no_checkpoint_yet(journal, run):
    assert journal.latest_checkpoint(run.id) is None
    assert journal.latest_context_checkpoint("chat-1") is None


def test_histories_that_grow_shrink_and_change(journal, run):
    steps = [
        [msg(1)],
        [msg(1), msg(2)],
        [msg(1), msg(2), msg(3)],
        [msg(1), {"role": "user", "content": "summary of 2 and 3"}],  # compressed
        [{"role": "user", "content": "summary of 2 and 3"}],  # head dropped
        [],
        [msg(1)],
    ]
    for i, history in enumerate(steps):
        journal.write_checkpoint(run.id, CheckpointData(state={"i": i}, histories={"0": history}))
        cp = journal.latest_checkpoint(run.id)
        assert cp.histories == {"0": history}, f"step {i}"
        assert cp.state == {"i": i}


def test_chat_rebuild_spans_runs(journal, run):
    journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": [msg(1)]}))
    journal.set_run_status(run.id, "completed")
    second = journal.admit("chat-1", "in-2", sha("next")).run
    journal.write_checkpoint(second.id, CheckpointData(state={}, histories={"0": [msg(1), msg(2)]}))
    cp = journal.latest_context_checkpoint("chat-1")
    assert cp.run_id == second.id
    assert cp.histories["0"] == [msg(1), msg(2)]


def test_result_and_checkpoint_in_one_commit(journal, run):
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="model", name="chat", args={}, policy="hold"
    )
    journal.commit_result(
        call.id, "answer", checkpoint=CheckpointData(state={"after": 1}, histories={"0": [msg(1)]})
    )
    cp = journal.latest_checkpoint(run.id)
    assert cp.state == {"after": 1}


def test_a_refused_result_writes_no_checkpoint(journal, run):
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="model", name="chat", args={}, policy="hold"
    )
    journal.commit_result(call.id, "answer")
    with pytest.raises(Exception, match="different committed result"):
        journal.commit_result(call.id, "other", checkpoint=CheckpointData(state={"x": 1}))
    assert journal.latest_checkpoint(run.id) is None


def test_checkpoint_on_a_held_run_is_refused(journal, run):
    journal.mark_needs_attention(run.id, "open_intent")
    with pytest.raises(RunNotActive):
        journal.write_checkpoint(run.id, CheckpointData(state={}))


def test_checkpoint_needs_checkpoint_data(journal, run):
    with pytest.raises(InvalidArgument):
        journal.write_checkpoint(run.id, {"state": {}})


def test_digest_mismatch_is_corrupt(journal, backend, run):
    ref = journal.write_checkpoint(
        run.id, CheckpointData(state={"a": 1}, histories={"0": [msg(1)]})
    )
    cp = journal.latest_checkpoint(run.id)
    body = json.dumps({"v": 1, "run_id": run.id, "seq": None, "state": {"a": 2}, "histories": {}})
    backend.corrupt_checkpoint(ref.id, body)
    with pytest.raises(CorruptCheckpoint) as info:
        journal.latest_checkpoint(run.id)
    assert info.value.code == "corrupt_checkpoint"
    assert info.value.reason == "digest_mismatch"
    assert info.value.checkpoint_id == cp.id
    with pytest.raises(CorruptCheckpoint):
        journal.latest_context_checkpoint("chat-1")


def test_damaged_history_blob_is_corrupt(journal, backend, run):
    journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": [msg(1)]}))
    import hashlib

    from durability import canonical_json

    h = hashlib.sha256(canonical_json(msg(1)).encode()).hexdigest()
    backend.corrupt_blob(h, b'{"role":"user","content":"forged"}')
    with pytest.raises(CorruptCheckpoint) as info:
        journal.latest_checkpoint(run.id)
    assert info.value.reason == "blob_digest_mismatch"


def test_a_corrupt_predecessor_is_not_used_as_a_base(journal, backend, run):
    ref = journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": [msg(1)]}))
    backend.corrupt_checkpoint(ref.id, "not json")
    # a fresh journal (no cache) writes the next checkpoint from scratch
    journal.set_masker(journal.masker)
    journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": [msg(1), msg(2)]}))
    assert journal.latest_checkpoint(run.id).histories["0"] == [msg(1), msg(2)]


def test_checkpoints_survive_reopening_without_cache(backend):
    with backend.open() as first:
        run = first.admit("chat-1", "in-1", sha("x")).run
        first.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": [msg(1)]}))
    with backend.open() as second:
        second.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": [msg(1), msg(2)]}))
        assert second.latest_checkpoint(run.id).histories["0"] == [msg(1), msg(2)]


def test_unserialisable_history_writes_nothing(journal, run):
    version = journal.get_run(run.id).version
    with pytest.raises(InvalidArgument) as info:
        journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": [object()]}))
    assert info.value.code == "not_serializable"
    assert journal.latest_checkpoint(run.id) is None
    assert journal.get_run(run.id).version == version
    call = journal.record_intent(
        run.id, agent_no=0, seq=1, kind="model", name="chat", args={}, policy="hold"
    )
    bad = CheckpointData(state={}, histories={"0": [float("inf")]})
    with pytest.raises(InvalidArgument):
        journal.commit_result(call.id, "answer", checkpoint=bad)
    assert journal.get_call(call.id).state == "open"  # nothing half-written
    assert journal.commit_result(call.id, "answer").state == "completed"


def test_only_the_wanted_histories_are_loaded(journal, run):
    histories = {"agent:0": [msg(1)], "log": [msg(2)], "resume:agent:0": [msg(3)]}
    journal.write_checkpoint(run.id, CheckpointData(state={"s": 1}, histories=histories))
    current = journal.latest_context_checkpoint(
        "chat-1", histories=lambda key: not key.startswith("resume:")
    )
    assert current.histories == {"agent:0": [msg(1)], "log": [msg(2)]}
    assert current.state == {"s": 1}
    assert journal.latest_checkpoint(run.id, histories=["log"]).histories == {"log": [msg(2)]}
    assert journal.latest_checkpoint(run.id, histories=()).histories == {}
    assert journal.latest_checkpoint(run.id).histories == histories
    with pytest.raises(InvalidArgument):
        journal.latest_checkpoint(run.id, histories="log")


@pytest.fixture
def node_per_step(monkeypatch):
    """Every checkpoint stores its new messages as a node blob (none carried inline)."""
    monkeypatch.setattr(history_write, "INLINE_MAX", 0)


def _chain_nodes(journal, run_id, key):
    """The history chain's node hashes, head first (read through the journal's blobs)."""
    row = journal.store.read(lambda tx: tx.checkpoints.latest(run_id=run_id))
    node = json.loads(row.body)["histories"][key]["base"]
    nodes = []
    while node is not None:
        nodes.append(node)
        node = json.loads(journal.get_blob(node))["base"]
    return nodes


def _grow(journal, run_id, steps):
    history = []
    for i in range(steps):
        history.append(msg(i))
        journal.write_checkpoint(run_id, CheckpointData(state={}, histories={"0": list(history)}))
    return history


def test_a_long_history_chain_reads_back(journal, run, node_per_step):
    history = _grow(journal, run.id, 60)
    assert len(_chain_nodes(journal, run.id, "0")) == 60
    assert journal.latest_checkpoint(run.id).histories["0"] == history
    journal.set_masker(journal.masker)  # no cache: the next write reads the chain back too
    history.append(msg(99))
    journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": history}))
    assert journal.latest_context_checkpoint("chat-1").histories["0"] == history


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (b"not json", "blob_digest_mismatch"),
        (b'{"add":[],"base":null,"keep":0}', "blob_digest_mismatch"),
        (None, "blob_missing"),
    ],
)
def test_a_damaged_node_in_the_middle_of_a_chain_is_corrupt(
    journal, backend, run, damage, reason, node_per_step
):
    _grow(journal, run.id, 30)
    middle = _chain_nodes(journal, run.id, "0")[15]
    if damage is None:  # the node is gone: its row now answers to another hash
        backend.overwrite("blobs", "hash", "0" * 64, "hash", middle)
    else:
        backend.corrupt_blob(middle, damage)
    with pytest.raises(CorruptCheckpoint) as info:
        journal.latest_checkpoint(run.id)
    assert info.value.reason == reason
