"""One agent container on the private engine, and the journal API through its published port.

The scripted model server listens on the host's address on the engine's bridge; the
container's port 80 is published on 127.0.0.1:<free port> for the test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.docker._engine import Engine, EngineError
from tests.integration._helpers import wait_until
from tests.support.model_server import ScriptedModel
from tests.support.ui_server import free_port

TOKEN = "docker-test-token"
KEY = {"X-API-KEY": TOKEN}
PROVIDER_KEY = "sk-scripted-docker-0123456789"


def agent_env(model: ScriptedModel) -> dict[str, str]:
    """The same variables as outside a container: settings, the provider key, the API token."""
    env = {"API_KEY_OTHER": PROVIDER_KEY, "A0_SET_mcp_server_token": TOKEN}
    env["A0_SET_chat_rename"] = "false"  # exactly the scripted model calls (no chat naming)
    for prefix in ("chat_model", "util_model"):
        env[f"A0_SET_{prefix}_provider"] = "other"
        env[f"A0_SET_{prefix}_api_base"] = model.url
        env[f"A0_SET_{prefix}_name"] = "scripted"
    return env


#: What the session measured; printed at the end of the run (tests/docker/conftest.py).
METRICS: dict[str, str] = {}


@dataclass
class DockerSetup:
    """The session's engine and the project image built on it (tests/docker/conftest.py)."""

    engine: Engine
    image: str
    timings: dict[str, float] = field(default_factory=dict)
    image_bytes: int = 0


@dataclass
class SharedImages:
    """What docker/compose.yml's `shared` profile runs: A0_SHARED_IMAGE, A0_POSTGRES_IMAGE."""

    worker: str
    postgres: str
    worker_bytes: int


class AgentContainer:
    """`docker run` / kill / start of the project image with a named volume on /a0/usr."""

    def __init__(self, engine: Engine, image: str, name: str, volume: str) -> None:
        self.engine = engine
        self.image = image
        self.name = name
        self.volume = volume
        self.port = 0
        self.url = ""

    @property
    def usr(self) -> Path:
        """The volume's files as the host sees them."""
        return self.engine.volume_path(self.volume)

    def run(self, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = ["run", "-d", "--name", self.name, "-p", f"127.0.0.1:{self.port}:80"]
        args += ["-v", f"{self.volume}:/a0/usr", "--health-interval", "1s"]
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        self.engine.docker(*args, self.image)

    def kill(self) -> None:
        self.engine.docker("kill", "-s", "KILL", self.name)
        wait_until(lambda: self.state("{{.State.Running}}") == "false", what="the container to die")

    def start(self) -> None:
        self.engine.docker("start", self.name)

    def remove(self) -> None:
        self.engine.docker("rm", "-f", self.name)

    def state(self, template: str) -> str:
        return self.engine.inspect(self.name, template)

    def logs(self) -> str:
        done = self.engine.docker("logs", "--tail", "200", self.name, check=False)
        return (done.stdout + done.stderr)[-6000:]

    def wait_healthy(self, timeout: float = 120) -> None:
        """The image's HEALTHCHECK reports healthy (it asks /api/health inside)."""

        def healthy() -> bool:
            if self.state("{{.State.Running}}") != "true":
                raise EngineError(f"container {self.name} stopped:\n{self.logs()}")
            return self.state("{{.State.Health.Status}}") == "healthy"

        try:
            wait_until(healthy, timeout=timeout, what=f"{self.name} to be healthy")
        except AssertionError as e:
            health = self.state("{{json .State.Health}}")
            raise AssertionError(f"{e}\n{health[-2000:]}\n{self.logs()}") from None

    def server_user(self) -> str:
        """The user that runs run_ui.py inside the container."""
        rows = self.engine.docker("exec", self.name, "ps", "-eo", "user:20,comm,args").stdout
        users = [
            r.split()[0]
            for r in rows.splitlines()[1:]
            if r.split()[1].startswith("python") and "run_ui.py" in r
        ]
        assert len(users) == 1, rows
        return users[0]

    # the HTTP API -----------------------------------------------------------------------
    def post(self, name: str, body: dict[str, Any], timeout: float = 60) -> httpx.Response:
        return httpx.post(f"{self.url}/api/{name}", json=body, headers=KEY, timeout=timeout)

    def api_message(self, message: str, **fields: Any) -> httpx.Response:
        return self.post("api_message", {"message": message, **fields}, timeout=180)

    def runs(self) -> list[dict[str, Any]]:
        response = self.post("durable_runs", {})
        assert response.status_code == 200, response.text
        return response.json()["runs"]

    def run_of(self, input_id: str) -> dict[str, Any]:
        rows = [r for r in self.runs() if r["input_id"] == input_id]
        assert len(rows) == 1, rows
        response = self.post("durable_run", {"run_id": rows[0]["run_id"]})
        assert response.status_code == 200, response.text
        return response.json()["run"]

    def wait_status(self, input_id: str, status: str, timeout: float = 120) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            row = self.run_of(input_id)
            return row if row["status"] == status else None

        return wait_until(reached, timeout=timeout, what=f"run {input_id} to be {status}")

    def decide(self, run: dict[str, Any], decision: str, **extra: Any) -> httpx.Response:
        body = {"run_id": run["run_id"], "decision": decision, "expected_version": run["version"]}
        return self.post("durable_decide", {**body, **extra})


def dump(value: Any) -> str:
    return json.dumps(value, indent=1, default=str)[:4000]
