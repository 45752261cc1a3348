"""Shell receipts across a real SIGKILL: a driver process runs a command and is killed.

Killing the driver alone (the agent process dies) leaves the shell running: the command
finishes and its receipt proves it. Killing the driver and the shell's process group (the
container dies) leaves a start marker without an exit marker: the verdict is unknown.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from durability import Journal, Masker
from durability.adapters.shell import ShellReceipts, call_args_digest
from python.helpers.files import BASE_DIR
from tests.integration._helpers import wait_until

pytestmark = pytest.mark.integration

#: The "agent": a ShellSession that runs one command with a receipt and waits for it.
DRIVER = r"""
import asyncio, sys
from pathlib import Path
from durability.adapters.shell import ShellReceipts
from python.helpers.shell import ShellSession, Timeouts

async def main() -> None:
    folder, work, call_id, args_digest, command = sys.argv[1:6]
    session = ShellSession(Path(work))
    await session.start()
    receipt = (ShellReceipts(Path(folder)), call_id, args_digest)
    result = await session.run(command, Timeouts(600, 600, 600), receipt=receipt)
    print("the driver was not killed:", result, flush=True)

asyncio.run(main())
"""

SECRET = "sk-receipt-secret-123"


def process_gone(pid: int) -> bool:
    """No such process, or only a zombie waiting to be reaped."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return text.rsplit(")", 1)[1].split()[0] == "Z"


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class Scenario:
    """A journaled code_execution_tool call run by a driver process that a test kills."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.go = tmp_path / "go"
        self.receipts = ShellReceipts(tmp_path / "usr" / "durability" / "receipts")
        self.db = tmp_path / "usr" / "durability" / "journal.sqlite"
        self.shell_pid: int | None = None
        command = (
            f"echo started; while [ ! -e {self.go} ]; do sleep 0.02; done; "
            f"echo done > marker; echo finished; echo {SECRET}"
        )
        self.args = {"runtime": "terminal", "code": command, "session": 0}
        with Journal.open_sqlite(self.db, masker=Masker({"API_KEY_X": SECRET})) as journal:
            run = journal.admit("chat-1", "input-1", "0" * 64).run
            call = journal.record_intent(
                run.id,
                agent_no=0,
                seq=1,
                kind="tool",
                name="code_execution_tool",
                args=self.args,
                policy="adapter:shell",
            )
        self.run_id, self.call_id = run.id, call.id
        self.args_digest = call_args_digest(call.args)  # digest of the *masked* arguments
        env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(BASE_DIR)}
        self.stderr = open(tmp_path / "driver.err", "wb")  # noqa: SIM115 - closed in stop()
        where = [str(self.receipts.folder), str(self.work)]
        argv = [sys.executable, "-c", DRIVER, *where, self.call_id, self.args_digest, command]
        self.driver = subprocess.Popen(
            argv,
            cwd=BASE_DIR,
            env=env,
            stdout=self.stderr,
            stderr=self.stderr,
            start_new_session=True,
        )

    def wait_started(self) -> None:
        start = self.receipts.start_path(self.call_id)
        wait_until(start.exists, timeout=30, what=f"the start marker ({self.driver_output()})")
        self.shell_pid = json.loads(start.read_text())["shell_pid"]
        assert self.shell_pid != self.driver.pid
        output = self.receipts.output_path(self.call_id)
        wait_until(lambda: output.read_text() == "started\n", what="the command's first line")

    def kill_driver(self) -> None:
        kill_group(self.driver.pid)  # the agent's whole process group, as a supervisor would
        self.driver.wait(timeout=30)
        assert self.driver.returncode == -signal.SIGKILL

    def classify_from_journal(self) -> str | tuple[str, dict]:
        with Journal.open_sqlite(self.db, masker=Masker({"API_KEY_X": SECRET})) as journal:
            (call,) = journal.open_intents(self.run_id)
        assert call.id == self.call_id and call.policy == "adapter:shell"
        return self.receipts.classify(call)

    def driver_output(self) -> str:
        return (self.tmp / "driver.err").read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        kill_group(self.driver.pid)
        with contextlib.suppress(Exception):
            self.driver.wait(timeout=30)
        if self.shell_pid is not None:
            kill_group(self.shell_pid)
        self.stderr.close()


@pytest.fixture
def scenario(tmp_path: Path):
    s = Scenario(tmp_path)
    yield s
    s.stop()


def test_a_command_outlives_the_agent_and_its_receipt_proves_completion(scenario):
    scenario.wait_started()
    scenario.kill_driver()
    assert not process_gone(scenario.shell_pid)  # the shell's own session survived the kill
    assert scenario.receipts.inspect(scenario.call_id, scenario.args_digest).status == "unknown"

    scenario.go.touch()  # let the command finish, with nobody reading its output
    exit_marker = scenario.receipts.exit_path(scenario.call_id)
    wait_until(exit_marker.exists, timeout=30, what="the exit marker")

    assert (scenario.work / "marker").read_text() == "done\n"
    verdict = scenario.receipts.inspect(scenario.call_id, scenario.args_digest)
    assert verdict.status == "completed" and verdict.exit_code == 0
    assert verdict.output == f"started\nfinished\n{SECRET}\n"
    outcome, recorded = scenario.classify_from_journal()
    assert outcome == "completed" and recorded["exit_code"] == 0
    assert recorded["output"] == verdict.output  # raw: the journal masks it when committing


def test_a_container_death_leaves_start_without_exit_and_the_verdict_is_unknown(scenario):
    scenario.wait_started()
    scenario.kill_driver()
    kill_group(scenario.shell_pid)  # the container dies: the shell's group goes too
    wait_until(lambda: process_gone(scenario.shell_pid), what="the shell to die")

    scenario.go.touch()
    assert not scenario.receipts.exit_path(scenario.call_id).exists()
    assert not (scenario.work / "marker").exists()
    verdict = scenario.receipts.inspect(scenario.call_id, scenario.args_digest)
    assert verdict.status == "unknown" and verdict.detail["shell_alive"] is False
    assert scenario.classify_from_journal() == "unknown"


def test_a_receipt_for_other_arguments_proves_nothing(scenario):
    scenario.wait_started()
    scenario.kill_driver()
    scenario.go.touch()
    wait_until(scenario.receipts.exit_path(scenario.call_id).exists, what="the exit marker")
    changed = {**scenario.args, "code": "echo something else"}
    got = scenario.receipts.classify({"id": scenario.call_id, "args": changed})
    assert got == "rejected:wrong_args_digest"
