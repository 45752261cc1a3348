"""docker/compose.yml's `shared` profile, run: PostgreSQL and two workers on one journal.

The images are the project's with the `postgres` extra (A0_SHARED_IMAGE) and a PostgreSQL
15 built from Debian's packages (A0_POSTGRES_IMAGE, tests/docker/postgres/: no registry is
reachable). `docker-compose --profile shared up -d` starts them as docs/docker.md says;
the test waits until PostgreSQL and both workers are healthy, then through the HTTP API:
a message sent to worker-1 (a shell call, then an answer, from the scripted model) is
seen with its committed run and its chat through worker-2, worker-2 continues that chat,
and the runs are rows of the one PostgreSQL journal. Then worker-1 freezes right after a
second shell call's committed result (A0_CRASH_AT=after_result@2, A0_CRASH_MODE=freeze),
`docker kill -s KILL` ends it, and worker-2 takes the run over once worker-1's lease ran
out: it completes it without running the shell command again or asking the model again
for the answered step.
"""

from __future__ import annotations

import base64
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.docker._agent import KEY, METRICS, DockerSetup, SharedImages, agent_env, dump
from tests.docker._compose import ComposeProject
from tests.integration._crash_matrix_support import answer, tool
from tests.integration._helpers import log_text, request_text, wait_until
from tests.support.model_server import ScriptedModel
from tests.support.ui_server import free_port

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1200)]

MAX_IMAGE_BYTES = 1_200_000_000  # Chromium for browser_agent (docs/docker.md, "Image size")
TASK = re.compile(r"SHARED\[(?P<kind>[a-z]+):(?P<label>[a-z0-9-]+)\]")
PASSWORD = "pg-secret-7f3a91c2"  # must never show in a worker's log
SERVICES = ["postgres", "worker-1", "worker-2"]
EFFECTS = "/a0/usr/shell-effects.log"
LEASE = "3"  # seconds; the default 30 would only make the takeover wait longer
OVERRIDE = f"""\
# The test's changes to docker/compose.yml: health checks every second, a short lease,
# and worker-1 freezes after its second committed shell result (the takeover phase); it
# stays down once killed, so the run can only go on at worker-2.
services:
  postgres:
    healthcheck: {{interval: 1s}}
  worker-1:
    healthcheck: {{interval: 1s}}
    restart: "no"
    environment:
      A0_DURABILITY_LEASE_SECONDS: "{LEASE}"
      A0_DURABILITY_HEARTBEAT_SECONDS: "1"
      A0_SET_chat_rename: "false"
      A0_CRASH_AT: after_result@2
      A0_CRASH_MATCH: code_execution_tool
      A0_CRASH_MODE: freeze
  worker-2:
    healthcheck: {{interval: 1s}}
    environment:
      A0_DURABILITY_LEASE_SECONDS: "{LEASE}"
      A0_DURABILITY_HEARTBEAT_SECONDS: "1"
      A0_SET_chat_rename: "false"
"""


def task(kind: str, label: str) -> str:
    return f"Please do SHARED[{kind}:{label}] now."


def respond(body: dict[str, Any]) -> dict[str, Any]:
    """Answers the newest task in the conversation by its kind and the replies since it."""
    messages = body.get("messages", [])
    for index in range(len(messages) - 1, -1, -1):
        found = TASK.search(_text(messages[index])) if messages[index]["role"] == "user" else None
        if found:
            break
    else:
        return answer("no task")
    replies = sum(1 for m in messages[index:] if m.get("role") == "assistant")
    if found["kind"] == "shell" and replies == 0:
        label = found["label"]
        code = f"echo {label} $(hostname) >> {EFFECTS}; echo OUT-{label} on $(hostname)"
        return tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    return answer(f"done {found['label']}")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content)
    return str(content)


class Worker:
    """One worker of the project, through its published port."""

    def __init__(self, name: str, port: int) -> None:
        self.name = name
        self.url = f"http://127.0.0.1:{port}"

    def post(self, endpoint: str, body: dict[str, Any], timeout: float = 60) -> httpx.Response:
        return httpx.post(f"{self.url}/api/{endpoint}", json=body, headers=KEY, timeout=timeout)

    def ok(self, endpoint: str, body: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        response = self.post(endpoint, body, timeout)
        assert response.status_code == 200, f"{self.name} {endpoint}: {response.text}"
        return response.json()


@pytest.fixture
def model(docker_setup: DockerSetup) -> Iterator[ScriptedModel]:
    """The scripted model on the host's bridge address (Compose's network reaches it too)."""
    with ScriptedModel(host=docker_setup.engine.gateway) as server:
        server.respond_with(respond)
        yield server


@pytest.fixture
def shared(
    docker_setup: DockerSetup, shared_images: SharedImages, model: ScriptedModel, tmp_path: Path
) -> Iterator[tuple[ComposeProject, Worker, Worker]]:
    """`--profile shared up -d` with an env file as a user writes it; `down -v` after."""
    ports = [free_port(), free_port()]
    fernet_key = base64.urlsafe_b64encode(os.urandom(32)).decode()
    values = {
        **agent_env(model),
        "A0_POSTGRES_PASSWORD": PASSWORD,
        "A0_DURABILITY_RESOURCE_KEY": fernet_key,
        "A0_SHARED_IMAGE": shared_images.worker,
        "A0_POSTGRES_IMAGE": shared_images.postgres,
        # published on the loopback address only
        "A0_WORKER_1_PORT": f"127.0.0.1:{ports[0]}",
        "A0_WORKER_2_PORT": f"127.0.0.1:{ports[1]}",
    }
    env_file = tmp_path / "shared.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()), encoding="utf-8")
    override = tmp_path / "health-every-second.yml"
    override.write_text(OVERRIDE, encoding="utf-8")
    project = ComposeProject(docker_setup.engine, "a0shared", env_file, override)
    try:
        started = time.monotonic()
        project.run("--profile", "shared", "up", "-d", "--no-build", *SERVICES)
        project.wait_healthy(SERVICES)
        METRICS["shared profile up to healthy"] = f"{time.monotonic() - started:.1f} s"
        yield project, Worker("worker-1", ports[0]), Worker("worker-2", ports[1])
    finally:
        started = time.monotonic()
        project.run("--profile", "shared", "down", "-v", "--remove-orphans", check=False)
        METRICS["shared profile down"] = f"{time.monotonic() - started:.1f} s"


def test_the_shared_profile_serves_one_chat_from_both_workers_and_survives_a_kill(
    shared_images, model, shared
):
    project, one, two = shared
    assert shared_images.worker_bytes < MAX_IMAGE_BYTES, f"{shared_images.worker_bytes / 1e6} MB"
    # Compose wired each worker to the database: the DSN (no password in it) and PGPASSWORD.
    for service in ("worker-1", "worker-2"):
        check = (
            "import os, psycopg; c = psycopg.connect(os.environ['A0_DURABILITY_POSTGRES_DSN']);"
            "print(*c.execute('select current_user, current_database()').fetchone())"
        )
        cid = project.container(service)
        done = project.engine.docker("exec", "-u", "a0", cid, "python", "-c", check)
        assert done.stdout.split() == ["agent_zero", "agent_zero"], done.stderr

    first = one.ok("api_message", {"message": task("shell", "first"), "input_id": "first"}, 180)
    assert (first["status"], first["response"]) == ("completed", "done first"), first
    context_id = first["context_id"]

    # worker-2 never ran this chat: it reads the run, its calls and the chat from the journal
    runs = two.ok("durable_runs", {"context_id": context_id})["runs"]
    assert [(r["input_id"], r["status"]) for r in runs] == [("first", "completed")], dump(runs)
    run = two.ok("durable_run", {"run_id": first["run_id"]})["run"]
    detail = dump(run)
    assert [(c["name"], c["status"], c["committed"]) for c in run["calls"]] == [
        ("model", "completed", True),
        ("code_execution_tool", "completed", True),
        ("model", "completed", True),
        ("response", "completed", True),
    ], detail
    shell = run["calls"][1]
    assert "OUT-first on" in shell["result"], detail  # the output, committed on worker-1
    chat = two.ok("api_log_get", {"context_id": context_id, "length": 1000})
    assert chat["context_id"] == context_id
    assert "done first" in log_text(chat["log"]["items"]), dump(chat)

    # ... and continues it: the model sees the first exchange in worker-2's request
    body = {"message": task("answer", "second"), "input_id": "second", "context_id": context_id}
    second = two.ok("api_message", body, 180)
    assert (second["context_id"], second["response"]) == (context_id, "done second"), second
    asked = [r for r in model.requests if "SHARED[answer:second]" in request_text(r)]
    assert len(asked) == 1 and "done first" in request_text(asked[0]), "history reached worker-2"
    both = one.ok("durable_runs", {"context_id": context_id})["runs"]
    assert sorted((r["input_id"], r["status"]) for r in both) == [
        ("first", "completed"),
        ("second", "completed"),
    ], dump(both)

    # the journal is PostgreSQL's: both runs are rows there
    query = "select input_id || ' ' || status from agent_zero.runs order by no"
    psql = ["psql", "-U", "agent_zero", "-d", "agent_zero", "-tA", "-c", query]
    rows = project.engine.docker("exec", project.container("postgres"), *psql).stdout
    assert rows.split("\n")[:2] == ["first completed", "second completed"], rows

    # worker-1 freezes right after the takeover run's shell result committed; then SIGKILL
    takeover_phase(project, one, two, model)
    for service in ("worker-1", "worker-2"):
        assert PASSWORD not in project.logs(service, tail=2000), f"{service} logged the password"


def takeover_phase(project: ComposeProject, one: Worker, two: Worker, model: ScriptedModel):
    engine = project.engine
    first_id = project.container("worker-1")
    hostname = engine.inspect(first_id, "{{.Config.Hostname}}")
    usr_one, usr_two = (volume_of(project, service) for service in ("worker-1", "worker-2"))
    body = {"message": task("shell", "takeover"), "input_id": "takeover"}
    sender = in_background(lambda: one.post("api_message", body, 180))
    fired = usr_one / "durability" / "failpoints-fired"
    wait_until(
        lambda: fired.exists() and "after_result@2:code_execution_tool" in fired.read_text(),
        timeout=120,
        what="worker-1 to freeze after the committed shell result",
    )
    assert effects(usr_one, "takeover") == [f"takeover {hostname}"]
    engine.docker("kill", "-s", "KILL", first_id)
    sender.join(30)
    assert engine.inspect(first_id, "{{.State.Status}} {{.State.ExitCode}}") == "exited 137"

    [row] = [r for r in two.ok("durable_runs", {})["runs"] if r["input_id"] == "takeover"]

    def completed() -> dict[str, Any] | None:
        run = two.ok("durable_run", {"run_id": row["run_id"]})["run"]
        return run if run["status"] == "completed" else None

    run = wait_until(completed, timeout=180, what="worker-2 to complete worker-1's run")
    detail = dump(run)
    assert run["decisions"] == [], detail
    assert [(c["name"], c["status"], c["attempt"]) for c in run["calls"]] == [
        ("model", "completed", 1),
        ("code_execution_tool", "completed", 1),
        ("model", "completed", 1),
        ("response", "completed", 1),
    ], detail
    assert f"OUT-takeover on {hostname}" in run["calls"][1]["result"], detail
    # the command ran once, on worker-1; worker-2 reused its committed output
    assert effects(usr_one, "takeover") == [f"takeover {hostname}"]
    assert effects(usr_two, "takeover") == []
    asked = [r for r in model.requests if "SHARED[shell:takeover]" in request_text(r)]
    assert len(asked) == 2, "one request before the kill, one after the takeover"
    assert f"OUT-takeover on {hostname}" in request_text(asked[1]), "the output was reused"
    query = (
        "select payload::jsonb->>'worker_id' from agent_zero.events"
        f" where run_id = '{row['run_id']}' and type = 'claim' order by id"
    )
    psql = ["psql", "-U", "agent_zero", "-d", "agent_zero", "-tA", "-c", query]
    claims = engine.docker("exec", project.container("postgres"), *psql).stdout.split()
    assert claims == ["worker-1", "worker-2"], claims
    assert "taken over by worker-2" in project.logs("worker-2", tail=2000)


def volume_of(project: ComposeProject, service: str) -> Path:
    """The service's /a0/usr volume as the host sees it."""
    template = '{{range .Mounts}}{{if eq .Destination "/a0/usr"}}{{.Name}}{{end}}{{end}}'
    return project.engine.volume_path(project.engine.inspect(project.container(service), template))


def effects(usr: Path, label: str) -> list[str]:
    path = usr / Path(EFFECTS).name
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [line for line in lines if line.split()[0] == label]


def in_background(fn: Callable[[], Any]) -> threading.Thread:
    def quiet() -> None:
        try:
            fn()
        except httpx.HTTPError:
            pass  # the worker dies under the request

    thread = threading.Thread(target=quiet, daemon=True)
    thread.start()
    return thread
