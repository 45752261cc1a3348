"""docker/compose.yml validates with the Compose implementation Debian ships (the plugin when
present, else docker-compose), for the default service and for the `shared` profile.

Only `config` runs here; test_compose_shared.py runs the shared profile."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docker._compose import COMPOSE_FILE, clean_environ, compose_command
from tests.support.ui_server import REPO

pytestmark = pytest.mark.docker


def config(env_file: Path, *extra: str) -> dict[str, Any]:
    """The resolved file, as Compose prints it after validating it."""
    argv = [*compose_command(), "--env-file", str(env_file), "-f", str(COMPOSE_FILE)]
    # the project name keeps Compose from deriving one from the folder; nothing is created
    done = subprocess.run(
        [*argv, "--project-name", "a0test", *extra, "config"],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_environ(),
    )
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    path = tmp_path / "compose.env"
    path.write_text(
        "A0_SET_mcp_server_token=compose-token\n"
        "API_KEY_OPENAI=sk-compose\n"
        "A0_DURABILITY_RESOURCE_KEY=resource-key-from-env-file\n"
        "A0_POSTGRES_PASSWORD=pg-password-from-env-file\n",
        encoding="utf-8",
    )
    return path


def test_the_default_service_is_one_agent_on_a_named_volume(env_file):
    services = config(env_file)["services"]
    # docker-compose v1 prints every service, the plugin only the active ones
    default = {name for name, service in services.items() if not service.get("profiles")}
    assert default == {"agent"}, "only the agent starts without a profile"
    agent = services["agent"]
    assert agent["build"]["dockerfile"] == "docker/Dockerfile"
    assert Path(agent["build"]["context"]) == REPO
    assert [(p["published"], p["target"]) for p in agent["ports"]] in (
        [(50080, 80)],
        [("50080", 80)],
    )
    assert [v.split(":")[:2] for v in _volumes(agent)] == [["a0-usr", "/a0/usr"]]
    env = agent["environment"]
    assert env["A0_SET_mcp_server_token"] == "compose-token"
    assert env["API_KEY_OPENAI"] == "sk-compose"
    assert not any(k.startswith(("A0_DURABILITY_", "PG")) for k in env), env  # SQLite
    # a variable the env file does not set is not passed at all (never as "")
    assert env.get("API_KEY_ANTHROPIC") is None


def test_the_shared_profile_starts_workers_after_a_healthy_postgres(env_file):
    services = config(env_file, "--profile", "shared")["services"]
    assert {"agent", "postgres", "worker-1", "worker-2"} <= set(services)
    for name in ("postgres", "worker-1", "worker-2"):
        assert services[name]["profiles"] == ["shared"]
    postgres = services["postgres"]
    assert "pg_isready" in postgres["healthcheck"]["test"]
    assert postgres["environment"]["POSTGRES_PASSWORD"] == "pg-password-from-env-file"
    workers = [services["worker-1"], services["worker-2"]]
    for number, worker in enumerate(workers, 1):
        assert worker["depends_on"] == {"postgres": {"condition": "service_healthy"}}
        assert worker["build"]["args"] == {"A0_EXTRAS": "postgres"}
        env = worker["environment"]
        assert env["A0_WORKER_ID"] == f"worker-{number}"
        assert env["A0_DURABILITY_RESOURCE_KEY"] == "resource-key-from-env-file"
        assert (
            env["A0_DURABILITY_POSTGRES_DSN"] == "postgresql://agent_zero@postgres:5432/agent_zero"
        )
        assert env["PGPASSWORD"] == "pg-password-from-env-file"
        assert env["A0_SET_mcp_server_token"] == "compose-token"
    # one journal, but each worker keeps its own data folder (receipts stay local)
    assert len({_volumes(w)[0].split(":")[0] for w in workers}) == 2


def _volumes(service: dict[str, Any]) -> list[str]:
    out = []
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):  # the long form (Compose v2 prints it)
            out.append(f"{volume['source']}:{volume['target']}")
        else:
            out.append(volume)
    return out


def test_the_example_env_file_validates_with_every_profile():
    services = config(REPO / "docker" / "example.env", "--profile", "shared")["services"]
    assert {"agent", "postgres", "worker-1", "worker-2"} <= set(services)
    # everything in the example is commented out: nothing is passed, nothing is "" (the
    # search URL has a default: the search profile's service)
    env = dict(services["agent"]["environment"])
    assert env.pop("A0_SET_searxng_url") == "http://searxng:8080"
    assert all(v is None for v in env.values())


def test_the_search_profile_runs_searxng_with_json_for_the_agent(env_file):
    services = config(env_file, "--profile", "search")["services"]
    assert {"agent", "searxng"} <= set(services)
    searxng = services["searxng"]
    assert searxng["profiles"] == ["search"]
    assert searxng["image"].startswith("searxng/searxng:")
    assert not searxng.get("ports"), "only the project's containers reach it"
    mounts = [v.split(":") for v in _volumes(searxng)]
    assert [m[1] for m in mounts] == ["/etc/searxng/settings.yml"]
    settings_file = Path(mounts[0][0])
    settings_file = (
        settings_file if settings_file.is_absolute() else COMPOSE_FILE.parent / settings_file
    )
    settings = yaml.safe_load(settings_file.read_text(encoding="utf-8"))
    assert "json" in settings["search"]["formats"], "search_engine reads the JSON API"
    assert settings["server"]["limiter"] is False and settings["use_default_settings"] is True
    assert searxng["environment"]["SEARXNG_BASE_URL"] == "http://searxng:8080/"
    # the agent asks that service: port 8080 is SearXNG's own in its image
    assert services["agent"]["environment"]["A0_SET_searxng_url"] == "http://searxng:8080"
    other = env_file.parent / "other.env"
    other.write_text("A0_SEARXNG_URL=http://search.lan:8888\n", encoding="utf-8")
    agent = config(other)["services"]["agent"]
    assert agent["environment"]["A0_SET_searxng_url"] == "http://search.lan:8888"
