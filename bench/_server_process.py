"""run_ui.py as a child process seen from outside: its output lines stamped on arrival,
health polled, idle memory read from /proc. For bench/recovery_bench.py.

Like tests/support/ui_server.py (same environment, same scripted model), but the output
comes through a pipe so every line gets the time it arrived, relative to the fork.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import _common
import httpx  # here, not while a timed server starts

REPO = _common.REPO
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
TOKEN = "bench-token"
# A provider key that cannot occur in a path (the journal masks secrets wherever they occur)
PROVIDER_KEY = "sk-scripted-0123456789abcdef"
POLL_S = 0.005
IMPORT_LINE = re.compile(
    r"import time:\s*\d+\s*\|\s*(?P<cumulative>\d+)\s*\|(?P<indent> +)(?P<name>\S+)$"
)
# start-up phases: the first output line matching each pattern, in the order they happen
PHASES = (
    ("first output", r""),
    ("serving on (imports and preload done)", r"serving on http"),
    ("lifespan start", r"Waiting for application startup"),
    ("journal open", r"journal open(:| \()"),  # SQLite, or a shared worker's
    ("startup complete", r"Application startup complete"),
    ("listening", r"Uvicorn running on"),
    ("idle chats listed", r"idle chats listed:"),  # their summaries, read in a thread
)


def _python() -> str:
    return str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(usr: Path, model_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("A0_SET_", "AUTH_", "API_KEY_", "WEB_UI_", "A0_CRASH"))
    }
    env.update(
        {
            "A0_USR_DIR": str(usr),
            "PYTHONUNBUFFERED": "1",
            "API_KEY_OTHER": PROVIDER_KEY,
            "A0_SET_mcp_server_token": TOKEN,
            # a bench's scripted turn gets exactly the model calls it scripts: no chat naming
            # by the utility model after the first exchange (one more call per new chat)
            "A0_SET_chat_rename": "false",
        }
    )
    for prefix in ("chat_model", "util_model"):
        env[f"A0_SET_{prefix}_provider"] = "other"
        env[f"A0_SET_{prefix}_api_base"] = model_url
        env[f"A0_SET_{prefix}_name"] = "scripted"
    env.update(extra or {})
    return env


class ServerProcess:
    """One run_ui.py; ``failpoint=(boundary, call name)`` arms A0_CRASH_AT/A0_CRASH_MATCH."""

    def __init__(
        self,
        usr: Path,
        model: Any,
        failpoint: tuple[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.usr = usr
        extra = {"A0_CRASH_AT": failpoint[0], "A0_CRASH_MATCH": failpoint[1]} if failpoint else {}
        extra.update(env or {})
        self.env = server_env(usr, model.url, extra)
        self.port = 0
        self.url = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.lines: list[tuple[float, str]] = []
        self._reader: threading.Thread | None = None

    def start(self) -> float:
        """Fork run_ui.py; returns the monotonic time just before the fork."""
        self.usr.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [_python(), "run_ui.py", "--host", "127.0.0.1", "--port", str(self.port)]
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            command, cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        self._reader = threading.Thread(target=self._read, daemon=True, name="server-output")
        self._reader.start()
        return self.started

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.append((time.monotonic(), raw.decode("utf-8", "replace").rstrip()))

    def tail(self, n: int = 40) -> str:
        return "\n".join(line for _, line in self.lines[-n:])

    def wait_healthy(self, deadline: float) -> float:
        """Poll /api/health every 5 ms; returns the monotonic time of the first 200.

        Each probe is one plain HTTP/1.1 request on a new socket, its status line read:
        the observer shares the machine's two cores with the server it times, and an httpx
        client cost the bench ~0.1 s of CPU while a server started (its TLS context, and
        its exception path for every refused connection)."""
        assert self.process is not None
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"run_ui.py exited with {self.process.returncode}:\n{self.tail()}"
                )
            if _health_ok(self.port):
                return time.monotonic()
            if time.monotonic() > deadline:
                raise RuntimeError(f"run_ui.py not healthy in time:\n{self.tail()}")
            time.sleep(POLL_S)  # polling interval of the measurement

    def first_poll(self) -> tuple[float, int]:
        """The UI's first ``/api/poll`` once the server answers: when it answered (monotonic)
        and how many chats it listed (the idle ones are read after health, issue #24)."""
        with httpx.Client(base_url=self.url, timeout=60) as client:
            token = client.get("/api/csrf_token")
            token.raise_for_status()
            client.headers["X-CSRF-Token"] = token.json()["token"]
            response = client.post("/api/poll", json={"context": "", "log_from": 0})
            response.raise_for_status()
            return time.monotonic(), len(response.json()["contexts"])

    def send_message(self, text: str, input_id: str) -> threading.Thread:
        """POST /api/api_message in a thread (the server may die before it answers)."""

        def send() -> None:
            with contextlib.suppress(httpx.HTTPError):
                httpx.post(
                    f"{self.url}/api/api_message",
                    headers={"X-API-KEY": TOKEN},
                    json={"message": text, "input_id": input_id},
                    timeout=120,
                )

        sender = threading.Thread(target=send, daemon=True, name="bench-message")
        sender.start()
        return sender

    def wait_exit(self, timeout: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def idle_rss_kib(self, deadline: float, quiet: float = 0.3) -> int:
        """VmRSS once the process used no CPU for ``quiet`` seconds (or at the deadline)."""
        assert self.process is not None
        pid = self.process.pid
        previous = _cpu_ticks(pid)
        while time.monotonic() < deadline:
            time.sleep(quiet)  # the quiet window being observed, not a synchronisation
            ticks = _cpu_ticks(pid)
            if ticks == previous:
                break
            previous = ticks
        return _rss_kib(pid)

    def phases(self) -> dict[str, float]:
        """Seconds from the fork to the first output line matching each phase."""
        found: dict[str, float] = {}
        for name, pattern in PHASES:
            for at, line in self.lines:
                if re.search(pattern, line):
                    found[name] = at - self.started
                    break
        return found

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM and wait (SIGKILL if it does not stop in time)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._join()
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
        self._join()

    def _join(self) -> None:
        if self._reader is not None:
            self._reader.join(5)
            self._reader = None


def _health_ok(port: int) -> bool:
    """True when GET /api/health on 127.0.0.1:``port`` answers 200."""
    request = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    status = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(request)
            while len(status) < 13:  # "HTTP/1.1 200 ", however the bytes arrive
                chunk = sock.recv(64)
                if not chunk:
                    break
                status += chunk
    except OSError:
        return False
    return status.startswith((b"HTTP/1.1 200 ", b"HTTP/1.0 200 "))


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc")


# what a deployment compiles (docker/Dockerfile runs compileall; pip compiles packages)
PROJECT_SOURCES = ("run_ui.py", "agent.py", "python", "durability")


def use_bytecode(prefix: Path) -> None:
    """Every Python started from now on (servers, import timings) runs from bytecode, as a
    deployment does, without littering the checkout: ``PYTHONPYCACHEPREFIX`` points at
    ``prefix`` (a cache prefix replaces every ``__pycache__``, the standard library's and
    the packages' too) and writing bytecode is allowed there even where the environment
    sets ``PYTHONDONTWRITEBYTECODE``. The project is compiled here (``compileall``); what
    else a server imports is written by the untimed warm-up start (``warm_up``)."""
    prefix.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(
        [_python(), "-m", "compileall", "-q", *PROJECT_SOURCES],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def warm_up(usr: Path, model: Any) -> None:
    """One untimed start and stop: the bytecode of every module a start imports (with
    ``use_bytecode``) and the disk cache of the interpreter and packages."""
    server = ServerProcess(usr, model)
    server.start()
    try:
        server.wait_healthy(deadline=time.monotonic() + 60)
    finally:
        server.stop()


def python_startup(samples: int = 5) -> float:
    """Median seconds of ``python -c pass`` with the server's interpreter."""
    times = []
    for _ in range(samples):
        start = time.monotonic()
        subprocess.run([_python(), "-c", "pass"], check=True)
        times.append(time.monotonic() - start)
    return statistics.median(times)


def run_ui_imports() -> dict[str, Any]:
    """``python -X importtime`` of run_ui and what it preloads before serving."""
    code = "import run_ui, agent, python.helpers.models"
    proc = subprocess.run(
        [_python(), "-X", "importtime", "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    entries = []
    for line in proc.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match:
            depth = (len(match["indent"]) - 1) // 2
            entries.append((depth, match["name"], int(match["cumulative"]) / 1e6))
    total = sum(c for d, _, c in entries if d == 0)
    largest = sorted((e for e in entries if e[0] <= 1), key=lambda e: -e[2])[:12]
    return {
        "total_s": total,
        "largest": [{"module": n, "depth": d, "cumulative_s": c} for d, n, c in largest],
    }
