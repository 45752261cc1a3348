"""A checkpoint serialises only the new messages, and still sees every change."""

from __future__ import annotations

import pytest

from durability import CheckpointData, Journal, checkpoints
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


@pytest.fixture
def journal(tmp_path):
    opened = Journal.open_sqlite(tmp_path / "journal.sqlite")
    yield opened
    opened.close()


def _checkpoint(journal, run_id, history):
    journal.write_checkpoint(run_id, CheckpointData(state={}, histories={"0": history}))
    return journal.latest_checkpoint(run_id).histories["0"]


def test_serialisation_tracks_the_new_messages_not_the_history(journal, monkeypatch):
    run = journal.admit("chat", "in-1", sha("x")).run
    history = [
        {"m": {"id": i, "ai": i % 2 == 1, "content": f"m{i} " + "x" * 100}} for i in range(2000)
    ]
    history.append({"log": {"no": 1, "timestamp": 1.5, "kvps": {"a": [1, None, 2.0]}}})
    _checkpoint(journal, run.id, history)
    counted: list[object] = []
    real = checkpoints.canonical_json

    def counting(value):
        counted.append(value)
        return real(value)

    monkeypatch.setattr(checkpoints, "canonical_json", counting)
    for step in range(5):
        history.append({"role": "assistant", "content": f"step {step}"})
        journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": history}))
    # per step: the new message (masked and plain), one node, one checkpoint body
    assert len(counted) <= 5 * 4, len(counted)
    assert all(not (isinstance(v, list) and len(v) > 1) for v in counted)


def test_numbers_and_booleans_that_compare_equal_are_still_changes(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    assert _checkpoint(journal, run.id, [{"n": 1}, "a"]) == [{"n": 1}, "a"]
    for value in (True, 1.0, 1, False, 0, 0.0, -0.0):
        got = _checkpoint(journal, run.id, [{"n": value}, "a"])
        assert got == [{"n": value}, "a"]
        assert type(got[0]["n"]) is type(value) and str(got[0]["n"]) == str(value)


def test_a_message_changed_in_place_is_seen(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    history = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "draft"}]
    _checkpoint(journal, run.id, history)
    history[1]["content"] = "final"  # the caller mutates its own message object
    history.append({"role": "user", "content": "next"})
    assert _checkpoint(journal, run.id, history) == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "final"},
        {"role": "user", "content": "next"},
    ]
    history[0]["content"] = ["nested", {"k": None}]
    changed = {"role": "user", "content": ["nested", {"k": None}]}
    assert _checkpoint(journal, run.id, history)[0] == changed


def test_tuples_and_lists_are_the_same_json(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    assert _checkpoint(journal, run.id, [["a", "b"]]) == [["a", "b"]]
    assert _checkpoint(journal, run.id, [("a", "b"), "c"]) == [["a", "b"], "c"]


def test_after_reopening_the_prefix_is_compared_by_hash(tmp_path):
    path = tmp_path / "journal.sqlite"
    history = [{"role": "user", "content": f"m{i}", "n": i} for i in range(50)]
    with Journal.open_sqlite(path) as journal:
        run = journal.admit("chat", "in-1", sha("x")).run
        _checkpoint(journal, run.id, history)
    with Journal.open_sqlite(path) as journal:
        history[10]["n"] = 10.0
        history.append({"role": "assistant", "content": "more"})
        assert _checkpoint(journal, run.id, history) == history
        history[1]["n"] = True  # == 1: only the canonical JSON tells them apart
        got = _checkpoint(journal, run.id, history)
        assert got == history and got[1]["n"] is True and isinstance(got[10]["n"], float)


class Text(str):
    """A str subclass: valid JSON, but not something the fast comparison can pack."""


def test_values_the_fast_path_cannot_pack_still_round_trip(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    history = [{"content": Text("odd")}, "plain"]
    assert _checkpoint(journal, run.id, history) == [{"content": "odd"}, "plain"]
    history.append("more")
    history[0] = {"content": Text("changed")}
    assert _checkpoint(journal, run.id, history) == [{"content": "changed"}, "plain", "more"]


def test_reading_a_history_back_costs_two_queries_not_one_per_node(journal, monkeypatch):
    from durability.store._tables.blobs import BlobTable

    run = journal.admit("chat", "in-1", sha("x")).run
    history: list[object] = []
    for i in range(50):  # 50 checkpoints: a chain of 50 nodes
        history.append({"role": "user", "content": f"m{i}"})
        journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": history}))
    queries: list[str] = []
    for name in ("get_many", "history_chain"):
        real = getattr(BlobTable, name)

        def counting(self, *args, _real=real, _name=name):
            queries.append(_name)
            return _real(self, *args)

        monkeypatch.setattr(BlobTable, name, counting)
    assert journal.latest_checkpoint(run.id).histories["0"] == history
    assert queries == ["history_chain", "get_many"]  # the chain, then its messages
