"""Start-up pruning: receipts stay only while their call's run can still be recovered."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.adapters.shell import ShellReceipts
from python.durable.startup import receipt_needed
from tests.durability.conftest import sha

pytestmark = pytest.mark.unit


def _intent(journal, chat: str, input_id: str):
    run = journal.admit(chat, input_id, sha(input_id)).run
    call = journal.record_intent(
        run.id,
        agent_no=0,
        seq=1,
        kind="tool",
        name="code_execution_tool",
        args={"code": "true"},
        policy="adapter:shell",
    )
    return run, call


def _plant(receipts: ShellReceipts, call_id: str) -> None:
    for suffix in (".start", ".exit", ".out"):
        (receipts.folder / f"{call_id}{suffix}").write_text("{}")


def test_prune_keeps_open_runs_receipts_only(journal, tmp_path: Path):
    receipts = ShellReceipts(tmp_path / "receipts")
    finished_run, finished = _intent(journal, "chat-a", "in-a")
    journal.commit_result(finished.id, {"ok": True})
    journal.set_run_status(finished_run.id, "completed")
    _, open_call = _intent(journal, "chat-b", "in-b")
    gone = "c" * 32
    for call_id in (finished.id, open_call.id, gone):
        _plant(receipts, call_id)

    removed = receipts.prune(receipt_needed(journal))

    assert removed == 2
    left = sorted(p.name for p in receipts.folder.iterdir())
    assert left == sorted(f"{open_call.id}{s}" for s in (".start", ".exit", ".out"))


def test_prune_drops_a_committed_calls_receipt_even_in_an_open_run(journal, tmp_path: Path):
    """A call whose result the journal holds needs no evidence, even while its run goes on
    (or is held): its output file, which may show a secret in clear, goes."""
    receipts = ShellReceipts(tmp_path / "receipts")
    run, done = _intent(journal, "chat-a", "in-a")
    journal.commit_result(done.id, {"message": "ok"})
    later = journal.record_intent(
        run.id,
        agent_no=0,
        seq=2,
        kind="tool",
        name="code_execution_tool",
        args={"code": "true"},
        policy="adapter:shell",
    )
    for call_id in (done.id, later.id):
        _plant(receipts, call_id)

    assert receipts.prune(receipt_needed(journal)) == 1
    left = sorted(p.name for p in receipts.folder.iterdir())
    assert left == sorted(f"{later.id}{s}" for s in (".start", ".exit", ".out"))
