"""docker/compose.yml driven by Debian's Compose against the tests' private engine.

`compose_command()` finds the implementation (the `docker compose` plugin, else Debian's
`docker-compose` 1.29). `ComposeProject` runs `up`, `down` and `ps` for one project name
with an env file, the way docs/docker.md tells a user, plus an override file of the test
(health checks every second instead of every 30 s).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.docker._engine import Engine, EngineError
from tests.integration._helpers import wait_until
from tests.support.ui_server import REPO

COMPOSE_FILE = REPO / "docker" / "compose.yml"


def compose_command() -> list[str]:
    client = "/usr/bin/docker"
    if os.access(client, os.X_OK):
        plugin = subprocess.run([client, "compose", "version"], capture_output=True, text=True)
        if plugin.returncode == 0:
            return [client, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy:
        return [legacy]
    message = "no Compose implementation (Debian package docker-compose; bash scripts/test.sh)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def clean_environ() -> dict[str, str]:
    """The tests' own A0_* and API_KEY_* never leak into a compose file's values."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("A0_", "API_KEY_"))}


class ComposeProject:
    """One Compose project on the private engine (`docker-compose -p NAME ...`)."""

    def __init__(
        self, engine: Engine, name: str, env_file: Path, override: Path | None = None
    ) -> None:
        self.engine = engine
        self.name = name
        self.files = ["-f", str(COMPOSE_FILE)] + (["-f", str(override)] if override else [])
        self.env_file = env_file

    def run(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        argv = [*compose_command(), "--env-file", str(self.env_file), *self.files]
        env = {**clean_environ(), "DOCKER_HOST": f"unix://{self.engine.socket}"}
        env.pop("DOCKER_CONTEXT", None)
        done = subprocess.run(
            [*argv, "--project-name", self.name, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise EngineError(
                f"compose {' '.join(args[:3])} failed ({done.returncode}):\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def container(self, service: str) -> str:
        """The id of the service's (one) container."""
        ids = self.run("ps", "-q", service).stdout.split()
        assert len(ids) == 1, f"{service}: {ids}"
        return ids[0]

    def logs(self, service: str, tail: int = 200) -> str:
        done = self.run("logs", "--no-color", "--tail", str(tail), service, check=False)
        return (done.stdout + done.stderr)[-6000:]

    def wait_healthy(self, services: list[str], timeout: float = 180) -> None:
        """Every service's container runs and its health check says healthy."""
        ids = {self.container(service): service for service in services}

        def healthy() -> bool:
            template = "{{.Id}} {{.State.Status}} {{.State.Health.Status}}"
            rows = self.engine.docker("inspect", "-f", template, *ids).stdout.split("\n")
            states = dict(row.split(" ", 1) for row in rows if row)
            for cid, state in states.items():
                if not state.startswith("running"):
                    raise EngineError(f"{ids[cid]} is {state}:\n{self.logs(ids[cid])}")
            return all(state == "running healthy" for state in states.values())

        try:
            wait_until(healthy, timeout=timeout, what=f"{', '.join(services)} to be healthy")
        except AssertionError as e:
            logs = "\n".join(f"--- {s}\n{self.logs(s, 40)}" for s in services)
            raise AssertionError(f"{e}\n{logs}") from None
