"""Kill the real process at the journal's named crash points; the journal tells the truth."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from durability import Journal
from durability.failpoints import CRASH_AT_ENV as CRASH_ENV
from durability.failpoints import JOURNAL_POINTS

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import hashlib, sys
    from durability import Journal

    journal = Journal.open_sqlite(sys.argv[1])
    run = journal.admit("chat", "in-1", hashlib.sha256(b"m").hexdigest()).run   # batch 1
    call = journal.record_intent(run.id, agent_no=0, seq=1, kind="tool", name="pay",
                                 args={"amount": 5}, policy="hold")              # batch 2
    print("intent acknowledged", flush=True)
    journal.commit_result(call.id, {"paid": True})                              # batch 3
    print("result acknowledged", flush=True)
    """
)


def run_child(path: Path, crash_at: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), CRASH_ENV: crash_at}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return proc.returncode, proc.stdout


def only_call(journal: Journal):
    [run] = journal.list_runs()
    [call] = journal.list_calls(run.id)
    return call


def test_crash_points_are_named():
    assert JOURNAL_POINTS == ("journal.batch_before_commit", "journal.batch_after_commit")


def test_killed_before_the_result_commit_leaves_an_open_intent(tmp_path):
    path = tmp_path / "journal.sqlite"
    code, out = run_child(path, "journal.batch_before_commit@3")
    assert code == -signal.SIGKILL
    assert out.splitlines() == ["intent acknowledged"]
    with Journal.open_sqlite(path) as journal:
        call = only_call(journal)
        assert call.state == "open"  # uncertain: recovery must hold or prove it
        assert journal.open_intents(call.run_id) == [call]


def test_killed_after_commit_before_ack_keeps_the_result(tmp_path):
    """The commit succeeded but its confirmation was lost: the journal still has it."""
    path = tmp_path / "journal.sqlite"
    code, out = run_child(path, "journal.batch_after_commit@3")
    assert code == -signal.SIGKILL
    assert out.splitlines() == ["intent acknowledged"]
    with Journal.open_sqlite(path) as journal:
        call = only_call(journal)
        assert (call.state, call.result) == ("completed", {"paid": True})
        # the restarted loop asks again and gets the result to reuse, not a new call
        again = journal.record_intent(
            call.run_id,
            agent_no=0,
            seq=1,
            kind="tool",
            name="pay",
            args={"amount": 5},
            policy="hold",
        )
        assert again == call


def test_killed_before_the_intent_commit_leaves_no_call(tmp_path):
    path = tmp_path / "journal.sqlite"
    code, out = run_child(path, "journal.batch_before_commit@2")
    assert code == -signal.SIGKILL
    assert out == ""
    with Journal.open_sqlite(path) as journal:
        [run] = journal.list_runs()
        assert journal.list_calls(run.id) == []  # the effect never started: safe to run
