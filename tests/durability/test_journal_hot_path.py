"""The journal's hot path (one statement per check + write) keeps the slow path's rules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durability import CheckpointData, Journal
from durability.canonical import canonical_json, fingerprint, fingerprint_from_json
from durability.errors import IntentMissing, ResultConflict, RunNotActive, RunNotFound
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(args=JSON, kind=st.text(min_size=1), name=st.text(min_size=1), policy=st.text())
def test_fingerprint_from_json_is_the_fingerprint(args, kind, name, policy):
    expected = fingerprint(kind, name, args, policy)
    assert fingerprint_from_json(kind, name, canonical_json(args), policy) == expected


@pytest.fixture(params=["engine", "interface_defaults"])
def journal(request, tmp_path, monkeypatch):
    """The SQLite engine's hot-path SQL, and the calls table's composed defaults."""
    if request.param == "interface_defaults":
        from durability.store._tables.calls import CallTable
        from durability.store.sqlite_tx import SqliteCalls

        for name in ("_insert_first", "_close_small"):
            monkeypatch.setattr(SqliteCalls, name, getattr(CallTable, name))
    opened = Journal.open_sqlite(tmp_path / "journal.sqlite")
    yield opened
    opened.close()


def _intent(journal, run_id, seq=0, args=None):
    return journal.record_intent(
        run_id,
        agent_no=0,
        seq=seq,
        kind="tool",
        name="t",
        args=args or {"n": seq},
        policy="never",
    )


def test_each_step_bumps_the_version_once_and_reuse_does_not(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    call = _intent(journal, run.id)
    assert journal.get_run(run.id).version == run.version + 1
    assert _intent(journal, run.id).id == call.id  # the recorded intent, reused
    assert journal.get_run(run.id).version == run.version + 1
    done = journal.commit_result(call.id, {"ok": 1}, checkpoint=CheckpointData({"s": 1}))
    assert done.state == "completed" and done.result == {"ok": 1} and done.args == {"n": 0}
    assert done == journal.get_call(call.id)
    assert journal.get_run(run.id).version == run.version + 2
    assert journal.commit_result(call.id, {"ok": 1}) == done  # same result: a no-op
    assert journal.get_run(run.id).version == run.version + 2
    with pytest.raises(ResultConflict):
        journal.commit_result(call.id, {"ok": 2})
    journal.write_checkpoint(run.id, CheckpointData({"s": 2}))
    assert journal.get_run(run.id).version == run.version + 3
    assert journal.latest_checkpoint(run.id).state == {"s": 2}


def test_refusals_on_the_hot_path_write_nothing(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    call = _intent(journal, run.id)
    with pytest.raises(RunNotFound):
        _intent(journal, "no-such-run")
    with pytest.raises(IntentMissing):
        journal.commit_result("no-such-call", {"ok": 1})
    journal.mark_needs_attention(run.id, "test")
    version = journal.get_run(run.id).version
    with pytest.raises(RunNotActive):
        _intent(journal, run.id, seq=1)
    with pytest.raises(RunNotActive):
        journal.commit_result(call.id, {"ok": 1})
    with pytest.raises(RunNotActive):
        journal.write_checkpoint(run.id, CheckpointData({}))
    assert journal.get_run(run.id).version == version
    assert [c.id for c in journal.list_calls(run.id)] == [call.id]
    assert journal.get_call(call.id).state == "open"
    assert journal.latest_checkpoint(run.id) is None


def test_a_second_writer_on_the_same_run_leaves_every_checkpoint_whole(tmp_path):
    """The history cache is trusted within a run: a checkpoint another journal wrote in
    between does not make the next one wrong (each chain is complete on its own)."""
    path = tmp_path / "journal.sqlite"
    first, second = Journal.open_sqlite(path), Journal.open_sqlite(path)
    try:
        run = first.admit("chat", "in-1", sha("x")).run
        a = [{"m": i} for i in range(5)]
        first.write_checkpoint(run.id, CheckpointData({}, {"0": a}))
        b = [{"m": "other"}, *a[1:], {"m": 99}]
        second.write_checkpoint(run.id, CheckpointData({}, {"0": b}))
        assert first.latest_checkpoint(run.id).histories["0"] == b
        c = [*a, {"m": 5}]
        first.write_checkpoint(run.id, CheckpointData({}, {"0": c}))
        assert second.latest_checkpoint(run.id).histories["0"] == c
    finally:
        first.close()
        second.close()


def test_a_large_result_is_spilled_on_the_hot_path_too(journal):
    run = journal.admit("chat", "in-1", sha("x")).run
    call = _intent(journal, run.id)
    big = {"out": "é" * 200_000}  # over the spill size only once UTF-8 encoded
    assert journal.commit_result(call.id, big).result == big
    assert journal.get_call(call.id).result == big
