"""Start run_ui.py as a real subprocess on a free port, for system and browser tests.

server = UiServer(tmp_path / "usr", env=ui_env_for(model_server))
base_url = server.start()
...
server.stop()     # SIGTERM and wait
server.kill()     # SIGKILL
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from tests.support.model_server import ScriptedModel

REPO = Path(__file__).resolve().parents[2]
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
SLOW_START = 60  # fixtures allow for a loaded CI machine; UiServer.start keeps 20 by default


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ui_env_for(model: ScriptedModel, token: str = "test-token") -> dict[str, str]:
    """Environment that points both models at the scripted server and sets the API token
    (chat renaming off)."""
    # chat_rename off: a scripted turn gets exactly the model calls its test scripts (the
    # rename's own tests turn it on)
    env = {"API_KEY_OTHER": "test", "A0_SET_mcp_server_token": token, "A0_SET_chat_rename": "false"}
    for prefix in ("chat_model", "util_model"):
        env[f"A0_SET_{prefix}_provider"] = "other"
        env[f"A0_SET_{prefix}_api_base"] = model.url
        env[f"A0_SET_{prefix}_name"] = "scripted"
    return env


class _PortTaken(Exception):
    """run_ui.py could not bind the port it was given: another process took it first."""


class UiServer:
    """One run_ui.py process with its own A0_USR_DIR; output goes to usr_dir/../run_ui.log."""

    def __init__(
        self, usr_dir: Path, env: dict[str, str] | None = None, extra_args: list[str] | None = None
    ) -> None:
        self.usr_dir = Path(usr_dir)
        self.env = dict(env or {})
        self.extra_args = list(extra_args or [])
        self.host = "127.0.0.1"
        self.port = 0
        self.url = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.usr_dir.parent / f"run_ui-{self.usr_dir.name}.log"
        self._log_file: Any = None

    def start(self, timeout: float = 20) -> str:
        # A free port can be taken by another process between probing and binding (many
        # servers start at once on a shared machine): start again on another port.
        for _ in range(5):
            try:
                return self._start_once(timeout)
            except _PortTaken:
                continue
        raise RuntimeError(f"run_ui.py found no free port:\n{self.output()}")

    def _start_once(self, timeout: float) -> str:
        self.usr_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.pick_port()
        self.url = f"http://{self.host}:{self.port}"
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("A0_SET_", "AUTH_", "API_KEY_", "WEB_UI_"))
        }
        env.update({"A0_USR_DIR": str(self.usr_dir), "PYTHONUNBUFFERED": "1"})
        env.update(self.env)
        python = VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable)
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in _closed()
        log_start = self._log_file.tell()
        self.process = subprocess.Popen(
            self.command(python),
            cwd=REPO,
            env=env,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._closed()
                if b"address already in use" in self.log_path.read_bytes()[log_start:]:
                    raise _PortTaken
                raise RuntimeError(
                    f"run_ui.py exited with {self.process.returncode}:\n{self.output()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/api/health", timeout=1).status_code == 200:
                    return self.url
            time.sleep(0.05)  # polling interval of the readiness wait, not a synchronisation
        self.kill()
        raise RuntimeError(f"run_ui.py not healthy after {timeout}s:\n{self.output()}")

    def pick_port(self) -> int:
        return free_port()

    def command(self, python: Path) -> list[str]:
        args = ["--host", self.host, "--port", str(self.port), *self.extra_args]
        return [str(python), "run_ui.py", *args]

    def output(self) -> str:
        if self._log_file is not None:
            self._log_file.flush()
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM, then wait; returns the exit code (SIGKILL if it does not stop in time)."""
        if self.process is None or self.process.poll() is not None:
            return self._closed()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        return self._closed()

    def kill(self) -> int | None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
        return self._closed()

    def _closed(self) -> int | None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return self.process.returncode if self.process is not None else None

    # small client helpers -------------------------------------------------------------
    def api_message(self, message: str, token: str = "test-token", **fields: Any) -> httpx.Response:
        body = {"message": message, **fields}
        return httpx.post(
            f"{self.url}/api/api_message", json=body, headers={"X-API-KEY": token}, timeout=120
        )

    @contextlib.contextmanager
    def ui_client(self) -> Iterator[httpx.Client]:
        """An httpx client with a session cookie and the CSRF header already set."""
        with httpx.Client(base_url=self.url, timeout=60) as client:
            response = client.get("/api/csrf_token")
            assert response.status_code == 200, response.text
            client.headers["X-CSRF-Token"] = response.json()["token"]
            yield client


@pytest.fixture
def ui_server(tmp_path: Path) -> Iterator[UiServer]:
    """A UiServer (not started) with a temporary usr dir; stopped after the test."""
    server = UiServer(tmp_path / "usr")
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def running_ui(ui_server: UiServer, model_server: ScriptedModel) -> Iterator[UiServer]:
    """run_ui.py started against the scripted model (API token 'test-token'); must stop with 0."""
    ui_server.env.update(ui_env_for(model_server))
    ui_server.start(timeout=SLOW_START)
    yield ui_server
    code = ui_server.stop()
    assert code == 0, f"run_ui.py did not stop cleanly ({code}):\n{ui_server.output()[-4000:]}"
