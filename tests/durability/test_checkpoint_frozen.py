"""Frozen history messages: serialised once, compared by identity, still masked."""

from __future__ import annotations

import pytest

from durability import CheckpointData, Journal, Masker, checkpoints, history_write
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


@pytest.fixture
def journal(tmp_path):
    opened = Journal.open_sqlite(
        tmp_path / "journal.sqlite", masker=Masker({"API_KEY_X": "s3cr3t!"})
    )
    yield opened
    opened.close()


def _checkpoint(journal, run_id, history):
    journal.write_checkpoint(run_id, CheckpointData(state={}, histories={"0": history}))
    return journal.latest_checkpoint(run_id).histories["0"]


def test_only_new_frozen_messages_are_serialised(journal, monkeypatch):
    run = journal.admit("chat", "in-1", sha("x")).run
    history = [journal.freeze({"id": i, "ai": i % 2 == 1, "c": f"m{i}"}) for i in range(500)]
    _checkpoint(journal, run.id, history)
    new = [journal.freeze({"id": 500 + step, "ai": True, "c": f"step {step}"}) for step in range(5)]
    counted: list[object] = []
    real = checkpoints.canonical_json

    def counting(value):
        counted.append(value)
        return real(value)

    monkeypatch.setattr(checkpoints, "canonical_json", counting)
    monkeypatch.setattr(history_write, "canonical_json", counting)
    monkeypatch.setattr(history_write, "_pack", lambda value: pytest.fail("packed"))
    for message in new:
        history.append(message)
        journal.write_checkpoint(run.id, CheckpointData(state={}, histories={"0": history}))
    assert len(counted) <= 5 * 2, len(counted)  # at most one node and one body per step
    monkeypatch.undo()
    got = journal.latest_checkpoint(run.id).histories["0"]
    assert got[-1] == {"id": 504, "ai": True, "c": "step 4"} and len(got) == 505


def test_a_replaced_or_removed_frozen_message_is_seen(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    history = [journal.freeze({"n": i}) for i in range(10)]
    _checkpoint(journal, run.id, history)
    history[3] = journal.freeze({"n": 3.0})  # equal value, other JSON
    history.append(journal.freeze({"n": 10}))
    got = _checkpoint(journal, run.id, history)
    assert got[3] == {"n": 3.0} and isinstance(got[3]["n"], float) and len(got) == 11
    del history[0]
    assert _checkpoint(journal, run.id, history) == [
        {"n": 3.0} if i == 3 else {"n": i} for i in range(1, 11)
    ]


def test_frozen_and_plain_messages_mix(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    history = [journal.freeze({"n": 0}), {"n": 1}]
    assert _checkpoint(journal, run.id, history) == [{"n": 0}, {"n": 1}]
    history.append(journal.freeze({"n": 2}))
    history[1]["n"] = True
    assert _checkpoint(journal, run.id, history) == [{"n": 0}, {"n": True}, {"n": 2}]
    assert _checkpoint(journal, run.id, history)[1]["n"] is True


def test_frozen_messages_are_masked_and_re_masked_under_new_secrets(journal, tmp_path):
    run = journal.admit("chat", "in-1", sha("x")).run
    frozen = journal.freeze({"c": "key s3cr3t! and t0ps3cr3t"})
    assert "s3cr3t!" not in frozen.text
    history = [frozen]
    assert _checkpoint(journal, run.id, history) == [{"c": "key §§secret(API_KEY_X) and t0ps3cr3t"}]
    journal.set_masker(Masker({"API_KEY_X": "s3cr3t!", "DB_PASSWORD": "t0ps3cr3t"}))
    history.append(frozen)  # frozen under the old masker: masked again
    got = _checkpoint(journal, run.id, history)
    assert got[1] == {"c": "key §§secret(API_KEY_X) and §§secret(DB_PASSWORD)"}
    raw = (tmp_path / "journal.sqlite").read_bytes() + (
        tmp_path / "journal.sqlite-wal"
    ).read_bytes()
    assert b"s3cr3t!" not in raw
