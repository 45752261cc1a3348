"""Adoption: a local command that outlives a SIGKILL of the server is watched, not held.

At start-up its receipt has a start marker, no exit marker, and its shell still runs: the run
resumes, the loop waits for the receipt, commits the command's output from it and goes on,
with the command's effect exactly once. A held run whose receipt later proves completion is
re-classified by the Recovery panel's refresh (``durable_recheck``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time

import httpx
import pytest

from tests.integration._durable_system import crashable
from tests.integration._helpers import request_text, wait_until

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture


def _send(server, message: str, input_id: str) -> threading.Thread:
    def send() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server dies mid-request
            server.api_message(message, input_id=input_id)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


def test_a_command_running_at_the_crash_is_adopted_and_the_run_ends_by_itself(
    crashable, model_server, tmp_path
):
    count = tmp_path / "effects.txt"
    code = f"sleep 10; echo once >> {count}; echo ADOPTED-OUTPUT"
    model_server.tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    model_server.tool("response", {"text": "adopted"})
    server = crashable.start()
    receipts = crashable.usr / "durability" / "receipts"
    sender = _send(server, "run the slow one", "adopt-1")
    start = wait_until(lambda: list(receipts.glob("*.start")), what="the start marker")[0]
    started_at = json.loads(start.read_text())["started_at"]
    crashable.kill()  # SIGKILL of the server alone: the command runs on
    killed_at = time.time()
    sender.join(30)

    crashable.start()  # begun within 2 seconds of the kill; the command still runs
    assert killed_at - started_at < 10
    assert not count.exists(), "the command ended before the restart: nothing to adopt"
    run = crashable.runs()[0]
    done = crashable.wait_status(run["run_id"], "completed", timeout=120)

    assert count.read_text().splitlines() == ["once"]  # one effect: adopted, not run again
    assert model_server.calls == 2
    assert "ADOPTED-OUTPUT" in request_text(model_server.requests[1])
    (shell,) = [c for c in done["calls"] if c["name"] == "code_execution_tool"]
    assert shell["status"] == "completed" and "receipt" in shell["result"]
    assert not done["decisions"]  # no person was asked
    crashable.stop()


def test_a_watch_that_times_out_is_held_then_refresh_reclassifies_it(
    crashable, model_server, tmp_path
):
    count = tmp_path / "effects.txt"
    gate = tmp_path / "gate"
    code = f"while [ ! -e {gate} ]; do sleep 0.05; done; echo once >> {count}; echo LATE-OUTPUT"
    model_server.tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    model_server.tool("response", {"text": "late"})
    quick = {"A0_SET_code_exec_max_timeout": "3", "A0_SET_recovery_recheck_seconds": "3600"}
    server = crashable.start(**quick)
    receipts = crashable.usr / "durability" / "receipts"
    sender = _send(server, "run the gated one", "adopt-2")
    wait_until(lambda: list(receipts.glob("*.start")), what="the start marker")
    crashable.kill()
    sender.join(30)

    crashable.start(**quick)  # watched; past code_exec_max_timeout it is held
    run = crashable.runs()[0]
    held = crashable.wait_status(run["run_id"], "needs_attention", timeout=120)
    assert held["reason"] == "uncertain_call"
    assert held["reason_detail"]["why"] == "watch_timed_out"
    unchanged = crashable.post("durable_recheck", {}).json()["changes"]
    assert [c["changed"] for c in unchanged] == [False]  # still running: nothing to prove

    gate.touch()
    wait_until(lambda: list(receipts.glob("*.exit")), what="the exit marker")
    changes = crashable.post("durable_recheck", {}).json()["changes"]
    assert [(c["changed"], c["outcome"]) for c in changes] == [(True, "completed")]
    assert "proves completion" in changes[0]["text"]
    done = crashable.wait_status(run["run_id"], "completed", timeout=120)
    assert count.read_text().splitlines() == ["once"]
    assert "LATE-OUTPUT" in request_text(model_server.requests[1])
    assert not done["decisions"]
    crashable.stop()


def test_an_adopted_shell_that_dies_without_an_exit_marker_is_held_process_ended(
    crashable, model_server, tmp_path
):
    count = tmp_path / "effects.txt"
    code = f"sleep 60; echo once >> {count}"
    model_server.tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    model_server.tool("response", {"text": "never"})
    long = {"A0_SET_code_exec_max_timeout": "600", "A0_SET_recovery_recheck_seconds": "3600"}
    server = crashable.start(**long)
    receipts = crashable.usr / "durability" / "receipts"
    sender = _send(server, "run the long one", "adopt-3")
    start = wait_until(lambda: list(receipts.glob("*.start")), what="the start marker")[0]
    shell_pid = json.loads(start.read_text())["shell_pid"]
    crashable.kill()
    sender.join(30)

    crashable.start(**long)  # recovery found the shell alive: the call is watched
    run = crashable.runs()[0]
    assert crashable.run(run["run_id"])["status"] == "active"
    os.killpg(shell_pid, signal.SIGKILL)  # the shell dies: no exit marker will ever come
    held = crashable.wait_status(run["run_id"], "needs_attention", timeout=120)

    assert held["reason"] == "uncertain_call"
    assert held["reason_detail"]["why"] == "process_ended"
    assert held["reason_detail"]["shell_pid"] == shell_pid
    assert not list(receipts.glob("*.exit"))
    assert not count.exists()  # the effect never happened, and nothing ran it again
    assert model_server.calls == 1
    crashable.stop()
