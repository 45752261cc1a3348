"""The Recovery panel's evidence: a real journal, real receipt files written by bash."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from durability import Journal, Masker
from durability.adapters.shell import ShellReceipts, call_args_digest
from python.api._durable_evidence import add_evidence, outcome_of
from python.api._durable_runs import detail_row

pytestmark = pytest.mark.unit

SECRET = "sk-evidence-0123456789"


@pytest.fixture
def journal(tmp_path: Path):
    j = Journal.open_sqlite(tmp_path / "j.sqlite", masker=Masker({"API_KEY_X": SECRET}))
    yield j
    j.close()


def _shell_call(journal: Journal, code: str, seq: int = 1):
    run = journal.admit("chat", f"in-{seq}", "0" * 64).run
    args = {"method": None, "args": {"runtime": "terminal", "session": 0, "code": code}}
    call = journal.record_intent(
        run.id,
        agent_no=0,
        seq=seq,
        kind="tool",
        name="code_execution_tool",
        args=args,
        policy="adapter:shell",
    )
    return run, call


def _run_in_bash(receipts: ShellReceipts, call, tmp_path: Path, code: str) -> None:
    script = tmp_path / f"{call.id}.sh"
    script.write_text(code)
    line = receipts.wrap(call.id, call_args_digest(call.args), script)
    subprocess.run(["bash", "-c", line], check=False, timeout=30)


async def test_a_shell_killed_mid_command_shows_start_no_exit_and_the_output_so_far(
    journal, tmp_path
):
    receipts = ShellReceipts(tmp_path / "receipts")
    code = f"echo step-1-done; echo {SECRET}; kill -9 $$"
    run, call = _shell_call(journal, code)
    _run_in_bash(receipts, call, tmp_path, code)
    detail = journal.read_run(run.id)
    runtime = (receipts, journal.masker)
    row = await add_evidence(detail_row(detail), detail.calls, *runtime)
    (shell,) = row["calls"]
    assert shell["command"]["code"].startswith("echo step-1-done")
    assert SECRET not in shell["command"]["code"]  # masked in the journal
    assert shell["outcome"] == "open"
    evidence = shell["receipt"]
    assert evidence["classification"] == "unknown"
    assert (evidence["started"], evidence["finished"], evidence["exit_code"]) == (True, False, None)
    assert evidence["shell_alive"] is False
    assert "step-1-done" in evidence["output_tail"]
    assert (
        SECRET not in evidence["output_tail"] and "§§secret(API_KEY_X)" in evidence["output_tail"]
    )


async def test_a_finished_command_shows_its_exit_code(journal, tmp_path):
    receipts = ShellReceipts(tmp_path / "receipts")
    run, call = _shell_call(journal, "echo all-done; exit 3")
    _run_in_bash(receipts, call, tmp_path, "echo all-done; (exit 3)")
    detail = journal.read_run(run.id)
    row = await add_evidence(detail_row(detail), detail.calls, receipts, journal.masker)
    evidence = row["calls"][0]["receipt"]
    assert (evidence["classification"], evidence["finished"], evidence["exit_code"]) == (
        "completed",
        True,
        3,
    )
    assert evidence["output_tail"].strip() == "all-done"


async def test_never_started_and_committed_calls(journal, tmp_path):
    receipts = ShellReceipts(tmp_path / "receipts")
    run, call = _shell_call(journal, "echo never")
    detail = journal.read_run(run.id)
    runtime = (receipts, journal.masker)
    evidence = (await add_evidence(detail_row(detail), detail.calls, *runtime))["calls"][0][
        "receipt"
    ]
    assert (evidence["classification"], evidence["started"]) == ("not_started", False)
    journal.commit_result(call.id, {"receipt": {"output": "x", "exit_code": 0}})
    detail = journal.read_run(run.id)
    row = await add_evidence(detail_row(detail), detail.calls, *runtime)
    assert (row["calls"][0]["outcome"], row["calls"][0]["receipt"]) == ("proven_by_receipt", None)


def test_outcome_words():
    def call(state, result=None):
        return SimpleNamespace(state=state, result=result)

    assert outcome_of(call("completed", {"message": "ok"})) == "committed"
    assert outcome_of(call("completed", {"confirmed_completed": True})) == "confirmed_by_person"
    assert outcome_of(call("failed", {"error": "x"})) == "failed"
    assert outcome_of(call("superseded")) == "superseded"
