"""Commands over SSH against a real OpenSSH server (tests/support/sshd.py).

The tool runs a command on the host with ``code_exec_ssh_enabled``; the remote receipt
reads back as completed, unknown (shell killed mid-command) or never started; a changed
host key refuses; a host that does not answer gives ``host_unreachable``.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from durability.adapters.shell import ShellReceipts, call_args_digest
from durability.adapters.ssh import (
    HOST_UNREACHABLE,
    SshHostKeyChanged,
    SshReceipts,
    SshTarget,
)
from python.helpers.shell import ShellSessions, Timeouts
from python.helpers.ssh_shell import SshShellSession
from python.tools.code_execution_tool import CodeExecution
from tests.integration._helpers import wait_until
from tests.support import sshd as sshd_support

pytestmark = [
    pytest.mark.integration,
    # in CI a missing prerequisite fails (scripts/test.sh installs openssh-server)
    pytest.mark.skipif(
        not sshd_support.available() and not os.environ.get("CI"),
        reason="needs root and openssh-server",
    ),
]

QUICK = Timeouts(first_output=60, between_output=60, total=120)


@pytest.fixture
def sshd(tmp_path):
    server = sshd_support.Sshd(tmp_path / "sshd").start()
    yield server
    server.stop()


@pytest.fixture
def target(sshd, tmp_path) -> SshTarget:
    return SshTarget(
        host="127.0.0.1",
        port=sshd.port,
        user=sshd.user,
        key_file=str(sshd.client_key),
        known_hosts=str(tmp_path / "usr" / "ssh" / "known_hosts"),
        receipts=str(tmp_path / "remote-receipts"),
    )


def ids(call_id: str, args: dict) -> tuple[str, str]:
    return call_id, call_args_digest(args)


async def test_tool_runs_the_command_on_the_ssh_host(sshd, tmp_path, monkeypatch):
    usr = tmp_path / "usr"
    usr.mkdir()
    monkeypatch.setenv("A0_USR_DIR", str(usr))
    settings = {
        "code_exec_ssh_enabled": True,
        "code_exec_ssh_addr": "127.0.0.1",
        "code_exec_ssh_port": sshd.port,
        "code_exec_ssh_user": sshd.user,
        "code_exec_ssh_key_file": str(sshd.client_key),
    }
    receipts = ShellReceipts(tmp_path / "local-receipts")
    context = SimpleNamespace(
        shells=ShellSessions(tmp_path / "work"), session=SimpleNamespace(receipts=receipts)
    )
    agent = SimpleNamespace(
        context=context,
        config=SimpleNamespace(settings=settings),
        mask=lambda text: text,
        handle_intervention=_nothing,
    )
    args = {"runtime": "terminal", "code": "echo over-ssh-$((40+2)); echo $SSH_CONNECTION"}
    tool = CodeExecution(agent, "code_execution_tool", None, args, "")  # type: ignore[arg-type]
    call_id, digest = ids("call-tool-ssh", args)
    tool.call_identity = (call_id, digest)
    try:
        response = await tool.execute()
        assert "over-ssh-42" in response.message
        assert "[exit code 0]" in response.message
        assert "127.0.0.1" in response.message  # it ran in an SSH session
        assert "first connection" in response.message  # trust on first use is shown
        known = (usr / "ssh" / "known_hosts").read_text()
        assert known.startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 ")
        # the local folder only points at the host; the host holds the markers
        pointer = receipts.remote_pointer(call_id)
        assert pointer is not None and pointer["ssh"]["port"] == sshd.port
        assert receipts.inspect(call_id, digest).status == "unknown"
        folder = Path(pointer["ssh"]["folder"])
        assert (folder / f"{call_id}.start").exists() and (folder / f"{call_id}.exit").exists()
        assert folder.stat().st_mode & 0o777 == 0o700
        # a second call on the same session says nothing about first use any more
        again = CodeExecution(agent, "code_execution_tool", None, {"code": "pwd"}, "")  # type: ignore[arg-type]
        assert "first connection" not in (await again.execute()).message
    finally:
        await context.shells.close_all()
        for suffix in (".start", ".exit", ".out"):
            Path(f"{Path.home()}/.a0-durable/receipts/{call_id}{suffix}").unlink(missing_ok=True)


async def _nothing() -> None:
    return None


def _gone(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return text.rsplit(")", 1)[1].split()[0] == "Z"


async def test_remote_receipt_reads_back_completed_with_the_output(target, tmp_path):
    local = ShellReceipts(tmp_path / "local")
    session = SshShellSession(target, tmp_path / "work")
    call_id, digest = ids("call-done", {"code": "x"})
    await session.start()
    try:
        result = await session.run(
            "printf 'line one\\n'; echo second >&2; exit_code_is() { return 3; }; exit_code_is",
            QUICK,
            receipt=(local, call_id, digest),
        )
    finally:
        await session.close()
    assert result.exit_code == 3
    assert result.output == "line one\nsecond\n"
    start = json.loads((Path(target.receipts) / f"{call_id}.start").read_text())
    assert start["call_id"] == call_id and start["args_digest"] == digest
    verdict = await SshReceipts(target).inspect(call_id, digest)
    assert verdict.status == "completed", verdict
    assert verdict.exit_code == 3 and verdict.output == "line one\nsecond\n"
    # the same through the recovery adapter's synchronous classify
    found = SshReceipts(target).classify({"id": call_id, "args": {"code": "x"}})
    assert found == (
        "completed",
        {
            "message": "line one\nsecond\n\n[exit code 3]",
            "output": "line one\nsecond\n",
            "exit_code": 3,
        },
    )
    # another call's arguments are not proved by this receipt
    other = await SshReceipts(target).inspect(call_id, call_args_digest({"code": "y"}))
    assert (other.status, other.reason) == ("rejected", "wrong_args_digest")


async def test_a_command_killed_mid_run_reads_unknown(target, tmp_path):
    local = ShellReceipts(tmp_path / "local")
    session = SshShellSession(target, tmp_path / "work")
    call_id, digest = ids("call-killed", {"code": "sleep"})
    await session.start()
    try:
        result = await session.run(
            "echo begun; sleep 300",
            Timeouts(first_output=60, between_output=1, total=120),
            receipt=(local, call_id, digest),
        )
        assert result.running and "begun" in result.output
        os.killpg(session._pid, signal.SIGKILL)  # the host's shell dies mid-command
        wait_until(lambda: _gone(session._pid), timeout=30, what="the shell to die")
    finally:
        await session.close()
    verdict = await SshReceipts(target).inspect(call_id, digest)
    assert verdict.status == "unknown", verdict
    assert verdict.detail["shell_alive"] is False
    never = await SshReceipts(target).inspect("call-never-ran", digest)
    assert never.status == "never_started"


async def test_a_changed_host_key_refuses(sshd, target, tmp_path):
    first = SshShellSession(target, tmp_path / "work")
    await first.start()
    assert first.first_use is not None
    await first.close()
    sshd.new_host_key()
    sshd.restart()
    second = SshShellSession(target, tmp_path / "work")
    with pytest.raises(SshHostKeyChanged) as caught:
        await second.start()
    await second.close()
    assert caught.value.code == "ssh_host_key_changed"
    verdict = await SshReceipts(target).inspect("call-any", call_args_digest({}))
    assert (verdict.status, verdict.reason) == (HOST_UNREACHABLE, "ssh_host_key_changed")


async def test_an_unreachable_host_gives_its_own_verdict(sshd, target):
    sshd.stop()
    verdict = await SshReceipts(target).inspect("call-any", call_args_digest({}))
    assert (verdict.status, verdict.reason) == (HOST_UNREACHABLE, "ssh_connect_failed")
    found = SshReceipts(target).classify({"id": "call-any", "args": {}})
    assert found == "host_unreachable:ssh_connect_failed"
