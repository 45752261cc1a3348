"""Start the test MCP servers (tests/support/mcp_test_server.py) for a test.

with http_mcp_server(log, token="t0k3n-abc") as url: ...   # streamable HTTP
config = stdio_config(log)                                   # an mcpServers entry
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.ui_server import VENV_PYTHON, free_port

REPO = Path(__file__).resolve().parents[2]
SERVER = REPO / "tests" / "support" / "mcp_test_server.py"
GARBAGE = REPO / "tests" / "support" / "mcp_garbage_server.py"


def python() -> str:
    return str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))


def stdio_config(log: Path, **env: str) -> dict:
    """An mcpServers entry that starts the test server over stdio."""
    return {"command": python(), "args": [str(SERVER)], "env": {"MCP_TEST_LOG": str(log), **env}}


def garbage_config(log: Path) -> dict:
    return {"command": python(), "args": [str(GARBAGE), "--log", str(log)]}


def _wait_port(port: int, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP test server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)  # polling interval of the readiness wait, not a synchronisation
    raise RuntimeError("the MCP test server did not listen in time")


@contextlib.contextmanager
def http_mcp_server(
    log: Path, *, token: str = "", transport: str = "http", name: str = "notes"
) -> Iterator[str]:
    """A test server over streamable HTTP (or SSE); yields its endpoint URL."""
    port = free_port()
    args = [python(), str(SERVER), "--transport", transport, "--port", str(port)]
    args += ["--log", str(log), "--name", name] + (["--token", token] if token else [])
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port, process)
        path = "/mcp" if transport == "http" else "/sse"
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        process.kill()
        process.wait(10)


def effects(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []
