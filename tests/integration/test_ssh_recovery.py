"""Recovery over SSH with a real sshd: the remote receipt proves what happened.

The server runs a command on the SSH host and is SIGKILLed while it runs; after a restart the
remote receipt (read over SSH, its location found in the journal) proves completion and the
run continues without a person. With the host unreachable at recovery time the run is held
with ``host_unreachable``, then re-classified when the host answers again: on the Recovery
panel's refresh, or by the periodic check.
"""

from __future__ import annotations

import contextlib
import os
import threading

import httpx
import pytest

from tests.integration._durable_system import crashable
from tests.integration._helpers import request_text, wait_until
from tests.support import sshd as sshd_support

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not sshd_support.available() and not os.environ.get("CI"),
        reason="needs root and openssh-server",
    ),
]

__all__ = ["crashable"]  # the fixture


@pytest.fixture
def sshd(tmp_path):
    server = sshd_support.Sshd(tmp_path / "sshd").start()
    yield server
    server.stop()


def ssh_env(sshd) -> dict[str, str]:
    return {
        "A0_SET_code_exec_ssh_enabled": "true",
        "A0_SET_code_exec_ssh_addr": "127.0.0.1",
        "A0_SET_code_exec_ssh_port": str(sshd.port),
        "A0_SET_code_exec_ssh_user": sshd.user,
        "A0_SET_code_exec_ssh_key_file": str(sshd.client_key),
    }


def crash_mid_command(crashable, model_server, tmp_path, sshd, env, input_id: str):
    """Run a gated command over SSH, SIGKILL the server while it runs, let it finish."""
    count, gate = tmp_path / "effects.txt", tmp_path / "gate"
    code = f"while [ ! -e {gate} ]; do sleep 0.05; done; echo once >> {count}; echo REMOTE-DONE"
    model_server.tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    model_server.tool("response", {"text": "remote done"})
    server = crashable.start(**env)
    pointers = crashable.usr / "durability" / "receipts"

    def send() -> None:
        with contextlib.suppress(httpx.HTTPError):
            server.api_message("run it over ssh", input_id=input_id)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    wait_until(lambda: list(pointers.glob("*.remote")), timeout=90, what="the .remote pointer")
    wait_until(lambda: crashable.runs(), what="the run")
    crashable.kill()  # SIGKILL mid-command: the remote shell runs on
    sender.join(30)
    for pointer in pointers.glob("*.remote"):
        pointer.unlink()  # recovery must find the location in the journal, not only here
    gate.touch()
    wait_until(count.exists, timeout=60, what="the remote command to finish by itself")
    return count


def test_the_remote_receipt_proves_completion_and_the_run_goes_on(
    crashable, model_server, tmp_path, sshd
):
    env = ssh_env(sshd)
    count = crash_mid_command(crashable, model_server, tmp_path, sshd, env, "ssh-1")

    crashable.start(**env)
    run = crashable.runs()[0]
    done = crashable.wait_status(run["run_id"], "completed", timeout=120)
    assert count.read_text().splitlines() == ["once"]
    assert "REMOTE-DONE" in request_text(model_server.requests[1])
    (shell,) = [c for c in done["calls"] if c["name"] == "code_execution_tool"]
    assert shell["status"] == "completed" and "receipt" in shell["result"]
    assert not done["decisions"]
    crashable.stop()


@pytest.mark.parametrize("how", ["refresh", "periodic"])
def test_a_host_unreachable_at_recovery_is_held_then_reclassified(
    crashable, model_server, tmp_path, sshd, how
):
    every = "1" if how == "periodic" else "3600"
    env = {**ssh_env(sshd), "A0_SET_recovery_recheck_seconds": every}
    count = crash_mid_command(crashable, model_server, tmp_path, sshd, env, "ssh-2")
    sshd.stop()  # the link is cut: nothing answers on the host's port

    crashable.start(**env)
    run = crashable.runs()[0]
    held = crashable.wait_status(run["run_id"], "needs_attention", timeout=120)
    assert held["reason"] == "uncertain_call"
    assert held["reason_detail"]["why"] == "host_unreachable"
    assert held["reason_detail"]["host"] == "127.0.0.1"
    if how == "refresh":
        still = crashable.post("durable_recheck", {}).json()["changes"]
        assert [(c["changed"], c["evidence"]) for c in still] == [(False, "host_unreachable")]
        assert crashable.run(run["run_id"])["status"] == "needs_attention"  # never guessed

    sshd.start()  # the link returns (same host key)
    if how == "refresh":
        changes = crashable.post("durable_recheck", {}).json()["changes"]
        assert [(c["changed"], c["outcome"]) for c in changes] == [(True, "completed")]
        assert "SSH host did not answer" in changes[0]["text"]
    done = crashable.wait_status(run["run_id"], "completed", timeout=120)
    assert count.read_text().splitlines() == ["once"]
    assert "REMOTE-DONE" in request_text(model_server.requests[1])
    assert not done["decisions"]
    crashable.stop()
