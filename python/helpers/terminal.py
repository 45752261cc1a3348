"""The local terminal of a shell session: its relay process (durability/adapters/pty_relay.py).

A local ``ShellSession`` runs bash on a pseudo-terminal owned by a relay that outlives the
server. This module starts a relay, finds one left by a server that died (``find_relay``:
its ``relay.json`` in the session's inbox and its process still there), and ends one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from durability.adapters import pty_relay
from durability.adapters._local import pid_alive as pid_alive

RELAY_SCRIPT = Path(pty_relay.__file__).resolve()
START_TIMEOUT = 30.0
COMMAND_FILE = "command.json"  # the receipt-wrapped command the terminal runs now


def _is_relay(pid: int) -> bool:
    """The process is a relay (a pid of a dead relay may have been reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return pid_alive(pid)
    return RELAY_SCRIPT.name.encode() in cmdline


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def find_relay(inbox: Path) -> dict[str, Any] | None:
    """The relay a previous server left on this inbox, when it still runs."""
    info = read_json(inbox / pty_relay.RELAY_FILE)
    if info is None:
        return None
    pid = info.get("pid")
    if isinstance(pid, int) and pid_alive(pid) and _is_relay(pid):
        return info
    with contextlib.suppress(OSError):  # a relay that died: its record goes
        (inbox / pty_relay.RELAY_FILE).unlink()
    return None


async def spawn_relay(
    inbox: Path, cwd: Path, env: dict[str, str]
) -> tuple[asyncio.subprocess.Process, dict[str, Any]]:
    """Start a relay (and its shell) on ``inbox``; the process and its ``relay.json``."""
    inbox.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        (inbox / pty_relay.RELAY_FILE).unlink()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(RELAY_SCRIPT),
        str(inbox),
        str(cwd),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=str(cwd),
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        info = read_json(inbox / pty_relay.RELAY_FILE)
        if info is not None and info.get("pid") == proc.pid:
            return proc, info
        if proc.returncode is not None or time.monotonic() > deadline:
            kill_terminal({"pid": proc.pid})
            raise OSError("the terminal relay did not start")
        await asyncio.sleep(0.01)


def kill_terminal(info: dict[str, Any] | None) -> None:
    """Kill a relay and its shell's whole session (the shell has a session of its own)."""
    if not info:
        return
    for key in ("shell_pid", "pid"):
        pid = info.get(key)
        if isinstance(pid, int) and pid > 0:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def exit_code_of(path: Path) -> int | None:
    """The exit code an exit marker records (None: no marker yet)."""
    marker = read_json(path)
    code = None if marker is None else marker.get("exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None
