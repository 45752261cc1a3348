"""Checkpoint formats on every engine: histories carried inline in the checkpoint row
(format 2, issue #24 round 3) and checkpoints written by the old code (format 1: one node
blob per changed history, the row naming the head) still read, resumed and continued."""

from __future__ import annotations

import json

import pytest

from durability import CheckpointData, CorruptCheckpoint, canonical_json, history_write
from durability.canonical import digest_text
from tests.durability._ops_support import old_format_checkpoint as _old_checkpoint
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


def msg(i, role="user"):
    return {"role": role, "content": f"message {i}", "meta": {"n": i}}


def _body(journal, run_id):
    row = journal.store.read(lambda tx: tx.checkpoints.latest(run_id=run_id))
    return json.loads(row.body)


def test_a_journal_written_by_the_old_format_reads_back_and_continues(backend):
    with backend.open() as journal:
        run = journal.admit("chat-1", "in-1", sha("hello")).run
        heads: dict = {}
        agent = [msg(1), msg(2, "assistant")]
        log = [msg(10)]
        _old_checkpoint(journal, run, {"agent:0": agent, "log": log}, heads)
        agent = [*agent, msg(3)]
        _old_checkpoint(journal, run, {"agent:0": agent, "log": log, "resume:log": log}, heads)
        cp = journal.latest_checkpoint(run.id)
        assert cp.state == {"old": True}
        assert cp.histories == {"agent:0": agent, "log": log, "resume:log": log}
    with backend.open() as journal:  # the new code continues the old chain (no cache)
        agent = [*agent, msg(4, "assistant")]
        ref = journal.write_checkpoint(
            run.id, CheckpointData(state={"new": 1}, histories={"agent:0": agent, "log": log})
        )
        assert ref.history_lengths == {"agent:0": 4, "log": 1}
        body = _body(journal, run.id)
        assert body["v"] == 2
        old_head = heads["agent:0"][0]
        assert body["histories"]["agent:0"] == {
            "base": old_head,
            "keep": 3,
            "add": [sha(canonical_json(msg(4, "assistant")))],
        }
        cp = journal.latest_context_checkpoint("chat-1")
        assert cp.histories == {"agent:0": agent, "log": log} and cp.state == {"new": 1}
        journal.set_run_status(run.id, "completed")
        second = journal.admit("chat-1", "in-2", sha("next")).run
        agent = [*agent, msg(5)]
        journal.write_checkpoint(second.id, CheckpointData(state={}, histories={"agent:0": agent}))
        assert journal.latest_checkpoint(second.id).histories == {"agent:0": agent}


def test_a_damaged_old_format_chain_is_still_corrupt(backend):
    with backend.open() as journal:
        run = journal.admit("chat-1", "in-1", sha("hello")).run
        heads: dict = {}
        _old_checkpoint(journal, run, {"0": [msg(1)]}, heads)
        _old_checkpoint(journal, run, {"0": [msg(1), msg(2)]}, heads)
        backend.corrupt_blob(heads["0"][0], b'{"add":[],"base":null,"keep":0}')
        with pytest.raises(CorruptCheckpoint) as info:
            journal.latest_checkpoint(run.id)
        assert info.value.reason == "blob_digest_mismatch"


def _node_blobs(journal, run_id, key) -> int:
    """How many node blobs the latest checkpoint's history ``key`` is built on."""
    node, count = _body(journal, run_id)["histories"][key]["base"], 0
    while node is not None:
        count += 1
        node = json.loads(journal.get_blob(node))["base"]
    return count


def test_a_growing_history_is_carried_inline_until_it_outgrows_the_row(journal):
    run = journal.admit("chat-1", "in-1", sha("hello")).run
    history = []
    limit = history_write.INLINE_MAX
    for i in range(limit):
        history.append(msg(i))
        journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": history}))
    entry = _body(journal, run.id)["histories"]["0"]
    assert entry["base"] is None and entry["keep"] == 0 and len(entry["add"]) == limit
    history.append(msg(limit))  # one more than the row carries: one node blob for all
    journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": history}))
    entry = _body(journal, run.id)["histories"]["0"]
    assert entry["keep"] == limit + 1 and entry["add"] == []
    assert _node_blobs(journal, run.id, "0") == 1
    history.append(msg(99))
    journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": history}))
    assert _body(journal, run.id)["histories"]["0"]["add"] == [sha(canonical_json(msg(99)))]
    assert journal.latest_checkpoint(run.id).histories["0"] == history
    history[3:] = [msg(50)]  # cut back into the node: its first 3 messages, then the new one
    journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": history}))
    entry = _body(journal, run.id)["histories"]["0"]
    assert entry["keep"] == 3 and len(entry["add"]) == 1
    journal.set_masker(journal.masker)  # no cache: the rows alone
    assert journal.latest_checkpoint(run.id).histories["0"] == history


def test_a_history_that_starts_another_of_the_checkpoint_names_it(journal):
    """A run's resume base is the current history at the run's start: at its end it is a
    prefix of the current history, named as such instead of repeating its entry."""
    run = journal.admit("chat-1", "in-1", sha("hello")).run
    log = [msg(i) for i in range(5)]
    journal.write_checkpoint(run.id, CheckpointData({}, {"log": log, "resume:log": log}))
    longer = [*log, msg(5), msg(6)]
    journal.write_checkpoint(run.id, CheckpointData({}, {"log": longer, "resume:log": log}))
    assert _body(journal, run.id)["histories"]["resume:log"] == {"of": "log", "keep": 5}
    journal.write_checkpoint(run.id, CheckpointData({}, {"log": [msg(9)], "resume:log": log}))
    entry = _body(journal, run.id)["histories"]["resume:log"]
    assert "of" not in entry and entry["keep"] + len(entry["add"]) == 5  # no longer a prefix
    assert journal.latest_checkpoint(run.id).histories == {"log": [msg(9)], "resume:log": log}
    journal.set_masker(journal.masker)  # no cache: the next entries from the row
    journal.write_checkpoint(run.id, CheckpointData({}, {"log": [msg(9)], "resume:log": longer}))
    assert journal.latest_checkpoint(run.id).histories == {"log": [msg(9)], "resume:log": longer}


def test_equal_histories_in_one_checkpoint_are_named_once(journal):
    run = journal.admit("chat-1", "in-1", sha("hello")).run
    log = [msg(1), msg(2)]
    histories = {"log": log, "resume:log": log, "agent:0": [msg(7)]}
    journal.write_checkpoint(run.id, CheckpointData(state={}, histories=histories))
    assert _body(journal, run.id)["histories"]["resume:log"] == {"of": "log", "keep": 2}
    assert journal.latest_checkpoint(run.id, histories=["resume:log"]).histories == {
        "resume:log": log
    }
    assert journal.latest_checkpoint(run.id).histories == histories


@pytest.mark.parametrize(
    "entry",
    [
        {"of": "resume:log", "keep": 1},  # names an `of` entry
        {"of": "nothing", "keep": 1},  # names no entry
        {"of": "resume:log", "keep": "1"},
        {"base": None, "keep": 1, "add": []},  # keeps more than its base holds
        {"base": None, "keep": 0, "add": "abc"},
        {"base": 5, "keep": 0, "add": []},
    ],
)
def test_a_malformed_inline_entry_is_corrupt(journal, backend, entry):
    run = journal.admit("chat-1", "in-1", sha("hello")).run
    ref = journal.write_checkpoint(
        run.id, CheckpointData(state={}, histories={"log": [msg(1)], "resume:log": [msg(1)]})
    )
    body = _body(journal, run.id)
    body["histories"]["log"] = entry
    text = canonical_json(body)
    backend.overwrite("checkpoints", "digest", digest_text(text), "id", ref.id)
    backend.corrupt_checkpoint(ref.id, text)
    with pytest.raises(CorruptCheckpoint) as info:
        journal.latest_checkpoint(run.id)
    assert info.value.reason in {"undecodable", "history_length_mismatch"}
