"""Shared workers as real processes: two run_ui.py workers on 127.0.0.1 (own ports, own usr
folders) against one PostgreSQL journal and the scripted model (docs/shared-workers.md).
The side-effect log is a file outside both workers."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration._durable_system import KEY, PROVIDER_KEY, install_side_effect_tool
from tests.integration._helpers import chat_log, log_text, request_text, wait_until
from tests.support.model_server import ScriptedFailure, ScriptedModel, model_server
from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.slow]

__all__ = ["model_server"]  # the fixture

LEASE = "2"
HEARTBEAT = "0.4"


class Workers:
    """run_ui.py workers of one shared journal (one namespace of the test's cluster)."""

    def __init__(self, tmp: Path, model: ScriptedModel, postgres: Any, namespace: str) -> None:
        from durability.crypto import generate_key

        self.tmp = tmp
        self.postgres = postgres
        self.namespace = namespace
        self.effects = tmp / "side_effects.log"
        self.env = {
            **ui_env_for(model),
            "API_KEY_OTHER": PROVIDER_KEY,
            "A0_DURABILITY_POSTGRES_DSN": postgres.dsn,
            "A0_DURABILITY_POSTGRES_NAMESPACE": namespace,
            "A0_DURABILITY_RESOURCE_KEY": generate_key(),
            "A0_DURABILITY_LEASE_SECONDS": LEASE,
            "A0_DURABILITY_HEARTBEAT_SECONDS": HEARTBEAT,
            "A0_DURABILITY_POSTGRES_POOL_SIZE": "4",
            "A0_TEST_SIDE_EFFECT_LOG": str(self.effects),
        }
        self.servers: list[UiServer] = []

    def start(self, name: str, **env: str) -> UiServer:
        usr = self.tmp / name
        install_side_effect_tool(usr)
        server = UiServer(usr, env={**self.env, "A0_WORKER_ID": name, **env})
        server.start(timeout=SLOW_START)
        self.servers.append(server)
        return server

    def side_effects(self) -> list[str]:
        if not self.effects.exists():
            return []
        return self.effects.read_text(encoding="utf-8").splitlines()

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.postgres.connect() as conn:
            conn.execute(f'SET search_path TO "{self.namespace}"')
            return conn.execute(query, params).fetchall()

    def claimers(self, run_id: str) -> list[str]:
        rows = self.sql(
            "SELECT payload FROM events WHERE run_id = %s AND type = 'claim' ORDER BY id", run_id
        )
        return [
            json.loads(p)["worker_id"] if isinstance(p, str) else p["worker_id"] for (p,) in rows
        ]

    def runs(self) -> list[tuple[str, str, str]]:
        return [(r, c, s) for r, c, s in self.sql("SELECT id, context_id, status FROM runs")]

    def stop_all(self) -> None:
        for server in self.servers:
            server.kill() if server.process and server.process.poll() is None else server.stop()


@pytest.fixture
def workers(tmp_path, model_server, postgres_server, pg_namespace) -> Iterator[Workers]:
    group = Workers(tmp_path, model_server, postgres_server, pg_namespace)
    yield group
    for server in group.servers:
        server.stop()


def post(server: UiServer, name: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.url}/api/{name}", json=body, headers=KEY, timeout=120)


def run_of(server: UiServer, run_id: str) -> dict[str, Any]:
    response = post(server, "durable_run", {"run_id": run_id})
    assert response.status_code == 200, response.text
    return response.json()["run"]


def wait_status(server: UiServer, run_id: str, status: str, timeout: float = 60) -> dict:
    def reached() -> dict[str, Any] | None:
        row = run_of(server, run_id)
        return row if row["status"] == status else None

    return wait_until(reached, timeout=timeout, what=f"run {run_id} to be {status}")


def in_background(fn: Callable[[], Any]) -> threading.Thread:
    def quiet() -> None:
        try:
            fn()
        except httpx.HTTPError:
            pass  # the worker died mid-request

    thread = threading.Thread(target=quiet, daemon=True)
    thread.start()
    return thread


def test_a_run_of_a_killed_worker_is_taken_over_and_each_effect_happens_once(workers, model_server):
    """Worker A is SIGKILLed right after its second tool's effect committed; when A's lease
    runs out worker B claims the run, reuses the committed calls and completes it, in the
    chat's work folder restored from the journal into a new private directory."""
    model_server.tool("side_effect", {"label": "pay-1"})
    model_server.tool("side_effect", {"label": "pay-2"})
    model_server.tool("response", {"text": "paid twice"})
    crash = {"A0_CRASH_AT": "after_result@2", "A0_CRASH_MATCH": "side_effect"}
    a_workdir = workers.tmp / "worker-a" / "workdir"
    a_workdir.mkdir(parents=True)
    (a_workdir / "notes.txt").write_text("kept across workers\n", encoding="utf-8")
    a = workers.start("worker-a", **crash)
    b = workers.start("worker-b")
    in_background(lambda: a.api_message("pay the bills", input_id="pay"))
    assert a.process is not None
    assert a.process.wait(120) == -signal.SIGKILL, a.output()[-3000:]
    assert workers.side_effects() == ["pay-1", "pay-2"]

    [(run_id, context_id, _status)] = workers.runs()
    done = wait_status(b, run_id, "completed")
    assert workers.side_effects() == ["pay-1", "pay-2"]  # reused, never run again
    assert model_server.calls == 3  # two replies reused; one call after the takeover
    assert workers.claimers(run_id) == ["worker-a", "worker-b"]
    assert "taken over by worker-b" in b.output()
    names = [c["name"] for c in done["calls"]]
    assert names == ["model", "side_effect", "model", "side_effect", "model", "response"]
    again = b.api_message("pay the bills", input_id="pay", context_id=context_id)
    assert again.json()["response"] == "paid twice"
    owner = workers.sql("SELECT worker_id FROM claims WHERE run_id = %s", run_id)
    assert owner == [(None,)]  # released when the run completed

    restored = list((workers.tmp / "worker-b" / "shared").glob("workdir-*/workdir"))
    assert len(restored) == 1, restored
    assert (restored[0] / "notes.txt").read_text(encoding="utf-8") == "kept across workers\n"
    assert restored[0].stat().st_mode & 0o777 == 0o700
    stored = workers.sql(
        "SELECT count(*), count(*) FILTER (WHERE position('kept across'::bytea in data) > 0)"
        " FROM resource_files"
    )
    assert stored[0][0] >= 1 and stored[0][1] == 0  # stored, and encrypted
    for server in (a, b):
        assert workers.postgres.password not in server.output()


def test_a_message_sent_through_another_worker_reaches_the_running_agent(workers, model_server):
    """The run works on A; a message for its chat through B is admitted into the journal
    and reaches A's agent as an intervention (its next model call sees it)."""
    release = threading.Event()

    def respond(body: dict) -> str | dict | ScriptedFailure:
        text = request_text(body)
        if "from worker b" in text:
            return {"tool_name": "response", "tool_args": {"text": "heard b"}, "thoughts": []}
        release.wait(30)
        return {"tool_name": "side_effect", "tool_args": {"label": "step"}, "thoughts": []}

    model_server.respond_with(respond)
    a = workers.start("worker-a")
    b = workers.start("worker-b")
    answer: dict[str, Any] = {}
    in_background(lambda: answer.update(a.api_message("work on", input_id="w1").json()))
    model_server.wait_for_calls(1, timeout=60)
    [(run_id, context_id, _)] = workers.runs()
    sent = b.api_message("from worker b", input_id="b1", context_id=context_id)
    assert sent.status_code == 200, sent.text
    assert sent.json()["run_id"] == run_id  # joined the run on A, no second run
    assert workers.sql("SELECT kind, run_id FROM inputs WHERE input_id = 'b1'") == [
        ("intervention", run_id)
    ]
    wait_until(lambda: "reached the agent" in a.output(), timeout=30, what="A picks it up")
    release.set()
    done = wait_status(a, run_id, "completed")
    assert any("from worker b" in request_text(r) for r in model_server.requests)
    assert workers.claimers(run_id) == ["worker-a"]
    assert done["status"] == "completed"
    # B shows the chat as the journal has it: in its chat list, with A's answer
    with b.ui_client() as client:
        polled = client.post("/api/poll", json={"context": context_id})
    assert polled.status_code == 200, polled.text
    assert context_id in [c["id"] for c in polled.json()["contexts"]]
    assert "heard b" in log_text(chat_log(b, context_id))


def test_a_decision_made_through_another_worker_is_carried_out_by_the_owner(workers, model_server):
    """A's run is held (the model failed); a retry grant through B makes it active again
    and A, which keeps the held run's claim, resumes it."""
    model_server.fail(500, "provider exploded", times=3)  # the first try and two retries
    model_server.tool("response", {"text": "after the grant"})
    a = workers.start("worker-a")
    b = workers.start("worker-b")
    first = a.api_message("hello", input_id="h1")
    assert first.json()["status"] == "needs_attention", first.text
    run_id = first.json()["run_id"]
    granted = post(b, "durable_retry_grant", {"run_id": run_id, "attempts": 1})
    assert granted.status_code == 200, granted.text
    wait_status(b, run_id, "completed")
    assert workers.claimers(run_id) == ["worker-a"]  # never moved: A carried it out
    assert "active again (a decision): resuming it here" in a.output()


def test_shared_mode_refuses_to_start_without_the_resource_key(tmp_path, postgres_server):
    env = {
        "A0_DURABILITY_POSTGRES_DSN": postgres_server.dsn,
        "A0_DURABILITY_POSTGRES_NAMESPACE": "t_refused",
    }
    server = UiServer(tmp_path / "usr", env=env)
    with pytest.raises(RuntimeError, match="exited with 2"):
        server.start(timeout=SLOW_START)
    output = server.output()
    assert "A0_DURABILITY_RESOURCE_KEY" in output
    assert "invalid_configuration" in output
    assert postgres_server.password and postgres_server.password not in output


def test_a_frozen_worker_that_lost_its_claim_commits_nothing_and_starts_nothing(
    workers, model_server
):
    """A is frozen (SIGSTOP) in the middle of a model call until its lease runs out; B
    claims the run and holds it (the model call's outcome is unknown). Thawed, A learns
    that its claim is gone: its late result does not commit, the tool the reply asks for
    never starts, and A says so in its log."""
    release = threading.Event()

    def respond(body: dict) -> dict:
        release.wait(60)
        return {"tool_name": "side_effect", "tool_args": {"label": "late"}, "thoughts": []}

    model_server.respond_with(respond)
    a = workers.start("worker-a")
    b = workers.start("worker-b")
    in_background(lambda: a.api_message("do it", input_id="d1"))
    model_server.wait_for_calls(1, timeout=60)
    [(run_id, _context_id, _)] = workers.runs()
    assert a.process is not None
    a.process.send_signal(signal.SIGSTOP)
    try:
        wait_until(
            lambda: workers.claimers(run_id) == ["worker-a", "worker-b"],
            timeout=60,
            what="worker B to take the run over",
        )
        held = wait_status(b, run_id, "needs_attention")
        assert held["reason"] == "uncertain_call"
    finally:
        a.process.send_signal(signal.SIGCONT)
    release.set()
    wait_until(lambda: "claim lost" in a.output(), timeout=30, what="A to notice")
    wait_until(
        lambda: "stopped on this worker" in a.output() or "stopped run" in a.output(),
        timeout=30,
        what="A to stop the run locally",
    )
    calls = workers.sql("SELECT kind, state FROM calls WHERE run_id = %s", run_id)
    assert calls == [("model", "open")]  # A's late reply was never committed
    assert workers.side_effects() == []  # and the tool it asked for never started
    assert run_of(b, run_id)["status"] == "needs_attention"
    assert workers.claimers(run_id) == ["worker-a", "worker-b"]
    assert model_server.calls == 1
