"""Retention: keep the newest N finished runs or those younger than D days; never open runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durability import Journal
from durability.errors import InvalidArgument
from durability.retention import FinishedRun, apply_retention, expired_runs
from durability.verify import verify_database
from tests.durability._ops_support import (
    DAY,
    Clock,
    count,
    journaled_run,
    old_format_checkpoint,
    sha,
)

pytestmark = pytest.mark.unit

NOW = 1_700_000_000.0


def test_selection_keeps_newest_n_or_younger_than_d() -> None:
    runs = [FinishedRun(f"r{age}", NOW - age * DAY) for age in (1, 5, 10, 40, 50, 60)]
    # newest 2 kept by count; r10 kept by age (< 30 days); r40, r50, r60 go
    assert expired_runs(runs, 2, 30, NOW) == ["r60", "r50", "r40"]
    assert expired_runs(runs, 5, 30, NOW) == ["r60"]
    assert expired_runs(runs, 0, 0, NOW) == ["r60", "r50", "r40", "r10", "r5", "r1"]
    assert expired_runs(runs, 100, 0, NOW) == []
    assert expired_runs(runs, 0, 365, NOW) == []


@given(
    ages=st.lists(st.floats(min_value=0, max_value=400), max_size=40),
    keep_runs=st.integers(min_value=0, max_value=50),
    keep_days=st.floats(min_value=0, max_value=400),
)
def test_selection_rule_holds_for_every_run(ages: list[float], keep_runs: int, keep_days: float):
    runs = [FinishedRun(f"r{i}", NOW - age * DAY) for i, age in enumerate(ages)]
    expired = set(expired_runs(runs, keep_runs, keep_days, NOW))
    ranked = sorted(runs, key=lambda r: (r.finished_at, r.id), reverse=True)
    for rank, run in enumerate(ranked):
        kept = rank < keep_runs or run.finished_at >= NOW - keep_days * DAY
        assert (run.id not in expired) == kept


@pytest.mark.parametrize("runs, days", [(-1, 30), (1.5, 30), (True, 30), (10, -1), (10, "x")])
def test_bad_limits_are_refused(runs: object, days: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        expired_runs([], runs, days, NOW)  # type: ignore[arg-type]
    assert info.value.code == "invalid_argument"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "durability" / "journal.sqlite"


def test_old_finished_runs_go_with_their_rows_and_blobs(db: Path) -> None:
    clock = Clock(NOW - 60 * DAY)
    with Journal.open_sqlite(db, clock=clock) as journal:
        old_done, _ = journaled_run(journal, "old-chat", "old-1", status="completed")
        old_failed, _ = journaled_run(journal, "old-chat-2", "old-2", status="failed")
        old_held, _ = journaled_run(journal, "held-chat", "held-1", status=None)
        journal.mark_needs_attention(old_held, "test_hold")
        old_active, _ = journaled_run(journal, "busy-chat", "busy-1", status=None)
        clock.now = NOW - 1 * DAY
        fresh, _ = journaled_run(journal, "new-chat", "new-1", status="stopped")
    before_blobs = count(db, "blobs")

    report = apply_retention(db, keep_runs=0, keep_days=30, now=NOW)

    assert sorted(report.run_ids) == sorted([old_done, old_failed])
    assert report.runs_removed == 2
    # per run: 3 message blobs (its 3 checkpoints carry them inline: no node blob)
    assert report.blobs_removed == 2 * 3
    assert count(db, "blobs") == before_blobs - 6
    with Journal.open_sqlite(db) as journal:
        remaining = {r.id: r.status for r in journal.list_runs()}
        assert remaining == {old_held: "needs_attention", old_active: "active", fresh: "stopped"}
        # the input id went with its run: it can start a new run now
        assert journal.admit("old-chat", "old-1", sha("other content")).created
        # open runs are intact and readable
        assert journal.latest_checkpoint(old_held) is not None
    for table in ("calls", "checkpoints", "events", "inputs"):
        conn_rows = count(db, table)
        assert conn_rows > 0
    assert verify_database(db).ok


def test_a_chat_left_without_runs_is_gone_with_its_plan(db: Path) -> None:
    clock = Clock(NOW - 60 * DAY)
    plan = {"title": "t", "items": [{"id": "1", "text": "x", "done": False}]}
    with Journal.open_sqlite(db, clock=clock) as journal:
        journaled_run(journal, "purged", "p-1")
        journal.replace_document("purged", "plan", plan, expected_revision=0, actor="t")
        journal.append_event("purged", "context_reset")
        journaled_run(journal, "partly", "q-1")
        journal.replace_document("partly", "plan", plan, expected_revision=0, actor="t")
        # a chat with a plan and no run yet is no retention matter
        journal.replace_document("planned", "plan", plan, expected_revision=0, actor="t")
        clock.now = NOW
        journaled_run(journal, "partly", "q-2")

    report = apply_retention(db, keep_runs=0, keep_days=30, now=NOW)

    assert report.runs_removed == 2 and report.chats_removed == 1
    with Journal.open_sqlite(db) as journal:
        assert journal.contexts_with_runs(["purged", "partly", "planned"]) == {"partly"}
        assert journal.read_document("purged").revision == 0  # gone with its chat
        assert journal.list_events(context_id="purged") == []
        assert journal.read_document("partly").revision == 1
        assert journal.read_document("planned").revision == 1
    assert verify_database(db).ok


def test_history_shared_with_a_kept_run_survives(db: Path) -> None:
    clock = Clock(NOW - 90 * DAY)
    with Journal.open_sqlite(db, clock=clock) as journal:
        first, history = journaled_run(journal, "chat", "in-1", steps=4)
        clock.now = NOW
        second, _ = journaled_run(journal, "chat", "in-2", steps=2, history=history)

    report = apply_retention(db, keep_runs=1, keep_days=30, now=NOW)

    assert report.run_ids == [first]
    assert verify_database(db).ok  # the kept run's chain still reaches the old messages
    with Journal.open_sqlite(db) as journal:
        checkpoint = journal.latest_checkpoint(second)
        assert checkpoint is not None
        assert len(checkpoint.histories["0"]) == 6
        assert checkpoint.histories["0"][0]["content"] == "in-1 step 0"


def test_dry_run_changes_nothing(db: Path) -> None:
    with Journal.open_sqlite(db, clock=Clock(NOW - 40 * DAY)) as journal:
        run_id, _ = journaled_run(journal, "chat", "in-1")
    report = apply_retention(db, keep_runs=0, keep_days=30, now=NOW, dry_run=True)
    assert report.run_ids == [run_id]
    assert report.runs_removed == 0
    assert count(db, "runs") == 1


def test_retention_while_the_agent_holds_the_journal_open(db: Path) -> None:
    clock = Clock(NOW - 40 * DAY)
    with Journal.open_sqlite(db, clock=clock) as journal:
        old, history = journaled_run(journal, "chat", "in-1")
        clock.now = NOW
        report = apply_retention(db, keep_runs=0, keep_days=30, now=NOW)
        assert report.run_ids == [old]
        # the open journal keeps working on the same chat after the sweep
        new, _ = journaled_run(journal, "chat", "in-2", history=history)
        checkpoint = journal.latest_checkpoint(new)
        assert checkpoint is not None and len(checkpoint.histories["0"]) == 6
    assert verify_database(db).ok


def test_blob_sweep_is_precise(db: Path) -> None:
    from durability.records import CheckpointData

    clock = Clock(NOW - 60 * DAY)
    shared = {"role": "user", "content": "the same words in two chats"}
    with Journal.open_sqlite(db, clock=clock) as journal:
        standalone = journal.put_blob(b"an attachment kept by its own reference")
        old = journal.admit("chat-a", "in-a", sha("a")).run
        call = journal.record_intent(
            old.id, agent_no=0, seq=0, kind="tool", name="big", args={}, policy="never"
        )
        big = {"out": "z" * 300_000}  # spilled into a blob
        journal.commit_result(
            call.id,
            big,
            checkpoint=CheckpointData(
                state={}, histories={"0": [shared, {"role": "assistant", "content": "only a"}]}
            ),
        )
        journal.set_run_status(old.id, "completed")
        clock.now = NOW
        kept = journal.admit("chat-b", "in-b", sha("b")).run
        journal.write_checkpoint(kept.id, CheckpointData(state={}, histories={"0": [shared]}))
        journal.set_run_status(kept.id, "completed")
    report = apply_retention(db, keep_runs=1, keep_days=30, now=NOW)
    assert report.run_ids == [old.id]
    # gone: the spilled result and the "only a" message (the history is inline: no node)
    assert report.blobs_removed == 2
    with Journal.open_sqlite(db) as journal:
        assert journal.get_blob(standalone) == b"an attachment kept by its own reference"
        checkpoint = journal.latest_checkpoint(kept.id)
        assert checkpoint is not None and checkpoint.histories["0"] == [shared]
    assert verify_database(db).ok


def test_a_kept_run_keeps_the_node_an_old_run_wrote_and_its_inline_messages(db: Path) -> None:
    """Issue #24 round 3: a checkpoint carries its newest messages inline, based on a node
    blob an earlier run of the chat may have written (here in the old format): the sweep of
    that run keeps the node and the messages the kept run reaches, and only those."""
    from durability.records import CheckpointData

    clock = Clock(NOW - 60 * DAY)
    first = [{"role": "user", "content": f"m{i}"} for i in range(3)]
    with Journal.open_sqlite(db, clock=clock) as journal:
        old = journal.admit("chat", "in-1", sha("1")).run
        heads: dict = {}
        old_format_checkpoint(journal, old, {"0": first[:2]}, heads)
        old_format_checkpoint(journal, old, {"0": first, "gone": [{"only": "old"}]}, heads)
        journal.set_run_status(old.id, "completed")
        clock.now = NOW
    with Journal.open_sqlite(db, clock=clock) as journal:  # no cache: from the old rows
        kept = journal.admit("chat", "in-2", sha("2")).run
        later = [*first, {"role": "assistant", "content": "inline"}]
        journal.write_checkpoint(kept.id, CheckpointData(state={}, histories={"0": later}))
        journal.set_run_status(kept.id, "completed")
    assert verify_database(db).ok
    report = apply_retention(db, keep_runs=1, keep_days=30, now=NOW)
    assert report.run_ids == [old.id]
    # gone: "gone"'s message and its node; the first node stays (the second is based on it)
    assert report.blobs_removed == 2
    with Journal.open_sqlite(db) as journal:
        checkpoint = journal.latest_checkpoint(kept.id)
        assert checkpoint is not None and checkpoint.histories["0"] == later
    assert verify_database(db).ok
