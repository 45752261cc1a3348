"""Typed input with delivery receipts over SSH, with a real sshd.

The terminal relay (durability/adapters/pty_relay.py) runs on the SSH host with the host's
python3 and outlives both the SSH connection and the server. A program asks a question
there; the server is SIGKILLed after the ``input`` call's intent and before its handover,
or after the relay's delivery marker. After the restart recovery reads the remote inbox
over SSH (its location from the ``.remote`` pointer or the journal's ``receipt_location``)
and proves "not delivered" (the answer is delivered once by the resumed run, to the program
that still waits) or "delivered" (the call is reconciled from the marker). Either way the
program's effect happens once and no person is asked. A host without python3 keeps the pipe
and the tool result says so.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from pathlib import Path

import pytest

from tests.integration._durable_system import crashable
from tests.integration._helpers import request_text, wait_until
from tests.integration.test_ssh_recovery import ssh_env, sshd
from tests.support import sshd as sshd_support

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not sshd_support.available() and not os.environ.get("CI"),
        reason="needs root and openssh-server",
    ),
]

__all__ = ["crashable", "sshd"]  # the fixtures

QUICK = {
    "A0_SET_code_exec_first_output_timeout": "20",
    "A0_SET_code_exec_between_output_timeout": "1",
}


def _script(model_server, effects: Path) -> None:
    question = f'read -p "continue? " a; echo "got $a" >> {effects}; echo "answer was $a"'
    model_server.tool(
        "code_execution_tool", {"runtime": "terminal", "session": 0, "code": question}
    )
    model_server.tool("input", {"keyboard": "y", "session": 0})
    model_server.tool("response", {"text": "answered"})


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _input_pointers(usr: Path) -> list[dict]:
    """The ``.remote`` pointers of input calls (they name the terminal's inbox on the host)."""
    found = [json.loads(p.read_text()) for p in (usr / "durability/receipts").glob("*.remote")]
    return [p for p in found if "inbox" in p.get("ssh", {})]


@pytest.mark.parametrize("forget_pointer", [False, True])
def test_ssh_killed_before_the_handover_the_input_is_proven_undelivered_and_delivered_once(
    crashable, model_server, tmp_path, sshd, forget_pointer
):
    env = {**ssh_env(sshd), **QUICK}
    effects = tmp_path / "effects.txt"
    _script(model_server, effects)
    crashable.crash_during(
        "answer the question over ssh",
        "ssh-pty-1",
        A0_CRASH_AT="pty.before_handover",
        A0_CRASH_MATCH="input",
        **env,
    )
    assert _lines(effects) == []  # the question still waits on the host: nothing was typed
    (pointer,) = _input_pointers(crashable.usr)  # written before the handover
    inbox = Path(pointer["ssh"]["inbox"])  # the sshd runs here: the host's files are local
    relay = json.loads((inbox / "relay.json").read_text())
    assert Path(f"/proc/{relay['pid']}").exists()  # the relay outlived the connection
    if forget_pointer:  # recovery must find the inbox through the journal
        for path in (crashable.usr / "durability/receipts").glob("*.remote"):
            path.unlink()

    crashable.start(**env)
    run = crashable.runs()[0]
    done = crashable.wait_status(run["run_id"], "completed", timeout=120)

    assert _lines(effects) == ["got y"]  # delivered by the resumed run, once
    assert model_server.calls == 3
    assert "answer was y" in request_text(model_server.requests[2])
    (typed,) = [c for c in done["calls"] if c["name"] == "input"]
    assert typed["status"] == "completed"
    assert not done["decisions"]  # the remote inbox decided: no person was asked
    assert done["reason"] is None
    (delivered,) = inbox.glob("*.delivered")
    assert json.loads(delivered.read_text())["seq"] == 1  # one input reached the terminal
    crashable.stop()


@pytest.mark.parametrize("forget_pointer", [False, True])
def test_ssh_killed_after_the_delivery_marker_the_call_is_reconciled_from_it(
    crashable, model_server, tmp_path, sshd, forget_pointer
):
    env = {**ssh_env(sshd), **QUICK}
    effects = tmp_path / "effects.txt"
    _script(model_server, effects)
    crashable.crash_during(
        "answer the question over ssh",
        "ssh-pty-2",
        A0_CRASH_AT="pty.after_delivery",
        A0_CRASH_MATCH="input",
        **env,
    )
    # the relay on the host wrote the bytes before its marker: the program got its answer
    wait_until(lambda: _lines(effects) == ["got y"], what="the program's effect")
    if forget_pointer:  # recovery must find the inbox through the journal
        for path in (crashable.usr / "durability/receipts").glob("*.remote"):
            path.unlink()

    crashable.start(**env)
    run = crashable.runs()[0]
    done = crashable.wait_status(run["run_id"], "completed", timeout=120)

    assert _lines(effects) == ["got y"]  # not typed a second time
    assert model_server.calls == 3
    assert "input delivered to session 0" in request_text(model_server.requests[2])
    (typed,) = [c for c in done["calls"] if c["name"] == "input"]
    assert typed["status"] == "completed"
    assert "delivery receipt" in json.dumps(typed["result"])
    assert not done["decisions"]
    crashable.stop()


def test_ssh_host_unreachable_at_recovery_holds_the_input_then_reclassifies(
    crashable, model_server, tmp_path, sshd
):
    env = {**ssh_env(sshd), **QUICK, "A0_SET_recovery_recheck_seconds": "3600"}
    effects = tmp_path / "effects.txt"
    _script(model_server, effects)
    crashable.crash_during(
        "answer the question over ssh",
        "ssh-pty-3",
        A0_CRASH_AT="pty.after_delivery",
        A0_CRASH_MATCH="input",
        **env,
    )
    wait_until(lambda: _lines(effects) == ["got y"], what="the program's effect")
    sshd.stop()

    crashable.start(**env)
    run = crashable.runs()[0]
    held = crashable.wait_status(run["run_id"], "needs_attention", timeout=120)
    assert held["reason_detail"]["why"] == "host_unreachable"
    assert "inbox" in held["reason_detail"]

    sshd.start()
    changes = crashable.post("durable_recheck", {}).json()["changes"]
    assert [(c["changed"], c["outcome"]) for c in changes] == [(True, "completed")]
    done = crashable.wait_status(run["run_id"], "completed", timeout=120)
    assert _lines(effects) == ["got y"]
    assert not done["decisions"]
    crashable.stop()


def test_a_host_without_python3_keeps_the_pipe_and_says_so(tmp_path, sshd):
    from durability.adapters.ssh import SshTarget
    from python.helpers.shell import Timeouts
    from python.helpers.ssh_shell import NO_PYTHON, SshShellSession

    target = SshTarget(
        host="127.0.0.1",
        port=sshd.port,
        user=sshd.user,
        key_file=str(sshd.client_key),
        known_hosts=str(tmp_path / "known_hosts"),
    )
    effects = tmp_path / "effects.txt"
    question = f'read -p "continue? " a; echo "got $a" >> {effects}; echo "answer was $a"'
    quick = Timeouts(first_output=5, between_output=1, total=60)

    async def ask(session: SshShellSession) -> tuple[object, str]:
        await session.start()
        try:
            first = await session.run(question, quick)
            assert first.running  # it waits for the answer
            marker = await session.send_input("y")
            rest = await session.read_more(Timeouts(20, 20, 60))
            return marker, rest.output
        finally:
            await session.close()

    with_relay = SshShellSession(target, tmp_path, tmp_path / secrets.token_hex(12))
    marker, output = asyncio.run(ask(with_relay))
    assert with_relay.no_relay is None
    assert isinstance(marker, dict) and marker["seq"] == 1 and marker["bytes"] == 2
    assert "answer was y" in output
    assert not list(Path(with_relay.remote_inbox).glob("*.delivered"))  # not journaled: gone

    piped = SshShellSession(target, tmp_path, tmp_path / secrets.token_hex(12))
    piped.python = "python3-absent"  # a host without python3
    marker, output = asyncio.run(ask(piped))
    assert piped.no_relay == NO_PYTHON
    assert marker is None  # typed into the pipe: no delivery receipt
    assert "answer was y" in output
    assert _lines(effects) == ["got y", "got y"]
