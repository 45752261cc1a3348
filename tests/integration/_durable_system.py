"""Helpers for the durable system tests: a run_ui.py that SIGKILLs itself at a failpoint,
restarts on the same usr dir, and reads the journal through the HTTP API."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration._helpers import wait_until
from tests.support.model_server import ScriptedModel
from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

ROOT = Path(__file__).resolve().parents[2]
KEY = {"X-API-KEY": "test-token"}
# A provider key that cannot occur in a tmp path: ui_env_for's "test" is a secret too, and
# the journal masks it inside every path (a replayed command would then differ).
PROVIDER_KEY = "sk-scripted-0123456789abcdef"


class Crashable:
    """run_ui.py processes, one at a time, on one usr dir (the journal survives them)."""

    def __init__(self, usr: Path, model: ScriptedModel) -> None:
        self.usr = usr
        self.model = model
        self.server: UiServer | None = None
        self.generation = 0

    def start(self, **env: str) -> UiServer:
        self.generation += 1
        base = {**ui_env_for(self.model), "API_KEY_OTHER": PROVIDER_KEY}
        server = UiServer(self.usr, env={**base, **env})
        server.log_path = self.usr.parent / f"run_ui-{self.generation}.log"
        server.start(timeout=SLOW_START)
        self.server = server
        return server

    def crash_during(
        self, message: str, input_id: str, context_id: str | None = None, **env: str
    ) -> None:
        """Start with a failpoint, send the message (to ``context_id``: that chat; else a
        new one), wait until the process killed itself."""
        server = self.start(**env)
        errors: list[BaseException] = []
        chat = {"context_id": context_id} if context_id else {}

        def send() -> None:
            try:
                server.api_message(message, input_id=input_id, **chat)
            except httpx.HTTPError as exc:  # the server died mid-request
                errors.append(exc)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        assert server.process is not None
        code = server.process.wait(120)
        sender.join(30)
        server.kill()
        assert code == -signal.SIGKILL, f"exit {code}:\n{server.output()[-3000:]}"

    def stop(self) -> None:
        if self.server is not None:
            code = self.server.stop()
            assert code == 0, f"run_ui.py did not stop cleanly ({code})"
            self.server = None

    def kill(self) -> None:
        if self.server is not None:
            self.server.kill()
            self.server = None

    # API --------------------------------------------------------------------------------
    def post(self, name: str, body: dict[str, Any]) -> httpx.Response:
        assert self.server is not None
        return httpx.post(f"{self.server.url}/api/{name}", json=body, headers=KEY, timeout=120)

    def runs(self, **filters: Any) -> list[dict[str, Any]]:
        response = self.post("durable_runs", filters)
        assert response.status_code == 200, response.text
        return response.json()["runs"]

    def run(self, run_id: str) -> dict[str, Any]:
        response = self.post("durable_run", {"run_id": run_id})
        assert response.status_code == 200, response.text
        return response.json()["run"]

    def only_run(self) -> dict[str, Any]:
        runs = self.runs()
        assert len(runs) == 1, runs
        return self.run(runs[0]["run_id"])

    def wait_status(self, run_id: str, status: str, timeout: float = 90) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            row = self.run(run_id)
            return row if row["status"] == status else None

        return wait_until(reached, timeout=timeout, what=f"run {run_id} to be {status}")

    def decide(self, run: dict[str, Any], decision: str, **extra: Any) -> httpx.Response:
        body = {"run_id": run["run_id"], "decision": decision, "expected_version": run["version"]}
        return self.post("durable_decide", {**body, **extra})


def install_side_effect_tool(usr: Path) -> None:
    """The test-only tool with an external side effect and no adapter (agent0 profile)."""
    tools = usr / "agents" / "agent0" / "tools"
    tools.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "tests" / "durable" / "side_effect_tool.py", tools / "side_effect.py")


def side_effects(usr: Path) -> list[str]:
    path = usr / "side_effects.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def assert_no_repeats(lines: list[str]) -> None:
    """The side-effect log: no action ran twice."""
    repeated = sorted({line for line in lines if lines.count(line) > 1})
    assert not repeated, f"side effects ran twice: {repeated}"


def corrupt_latest_checkpoint(db_path: Path) -> None:
    """Flip bytes in the newest checkpoint row (the server must be down)."""
    with closing(sqlite3.connect(db_path)) as db:
        row_id, body = db.execute(
            "SELECT id, body FROM checkpoints ORDER BY id DESC LIMIT 1"
        ).fetchone()
        middle = len(body) // 2
        flipped = body[:middle] + chr(ord(body[middle]) ^ 0x01) + body[middle + 1 :]
        db.execute("UPDATE checkpoints SET body = ? WHERE id = ?", (flipped, row_id))
        db.commit()


@pytest.fixture
def crashable(tmp_path: Path, model_server: ScriptedModel) -> Iterator[Crashable]:
    harness = Crashable(tmp_path / "usr", model_server)
    harness.usr.mkdir(parents=True)
    try:
        yield harness
    finally:
        harness.kill()
