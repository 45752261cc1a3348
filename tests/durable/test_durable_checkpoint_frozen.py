"""The checkpoint builder's frozen history entries: reused while unchanged, renewed on change."""

from __future__ import annotations

import pytest

from durability import CheckpointData, Journal, Masker
from durability.canonical import canonical_json
from python.durable import checkpoint as durable_checkpoint
from python.helpers.history import Bulk, History, Message

pytestmark = pytest.mark.unit


@pytest.fixture
def journal(tmp_path):
    opened = Journal.open_sqlite(
        tmp_path / "journal.sqlite", masker=Masker({"API_KEY_A": "k3y-v4lue"})
    )
    yield opened
    opened.close()


def _round_trip(journal, run_id, history):
    """Checkpoint the frozen flattening and rebuild it; it must equal the plain one."""
    frozen = durable_checkpoint.flatten_history(history, journal)
    journal.write_checkpoint(run_id, CheckpointData({}, {"agent:0": frozen}))
    stored = journal.latest_checkpoint(run_id).histories["agent:0"]
    plain = journal.masker.mask(durable_checkpoint.flatten_history(history))
    assert stored == plain
    assert canonical_json(stored) == canonical_json(plain)  # exact types (1, 1.0, true)
    return frozen


def test_unchanged_messages_keep_their_frozen_entries(journal):
    run = journal.admit("chat", "in-1", "0" * 64).run
    history = History()
    for i in range(20):
        history.add(i % 2 == 1, f"message {i}")
    first = _round_trip(journal, run.id, history)
    history.add(True, "one more")
    second = _round_trip(journal, run.id, history)
    assert all(a is b for a, b in zip(first, second[: len(first)], strict=True))
    assert len(second) == len(first) + 1


def test_every_kind_of_change_is_seen(journal):
    run = journal.admit("chat", "in-1", "0" * 64).run
    history = History()
    history.add(False, "hello k3y-v4lue")
    history.add(True, {"tool": "x", "out": [1, 2]})
    _round_trip(journal, run.id, history)
    history.current.messages[0].content = "edited"  # a new str
    history.current.messages[1].content["out"].append(3)  # dict content changed in place
    _round_trip(journal, run.id, history)
    history.current.messages[0].ai = 1  # == True, other JSON
    _round_trip(journal, run.id, history)
    history.current.messages[0] = Message(ai=False, content="edited", id=99)
    _round_trip(journal, run.id, history)
    history.new_topic()
    history.topics[0].summary = "summary"
    history.bulks.append(Bulk(summary="older", topics=2))
    history.add(False, "next")
    _round_trip(journal, run.id, history)
    history.bulks[0].topics = 3
    stored = _round_trip(journal, run.id, history)
    assert stored[0].text == '{"bulk":{"summary":"older","topics":3}}'


def test_frozen_entries_follow_a_new_masker(journal):
    run = journal.admit("chat", "in-1", "0" * 64).run
    history = History()
    history.add(False, "pw hunter22 and k3y-v4lue")
    _round_trip(journal, run.id, history)
    journal.set_masker(Masker({"API_KEY_A": "k3y-v4lue", "DB_PASSWORD": "hunter22"}))
    _round_trip(journal, run.id, history)
    got = journal.latest_checkpoint(run.id).histories["agent:0"][1]
    assert got["m"]["content"] == "pw §§secret(DB_PASSWORD) and §§secret(API_KEY_A)"
