"""Shared-worker tests with real processes: run_ui.py workers on 127.0.0.1 (own ports, own
usr folders) against one PostgreSQL journal and the scripted model. The side-effect log
is a file outside every worker."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.integration._durable_system import KEY, PROVIDER_KEY, install_side_effect_tool
from tests.integration._helpers import wait_until
from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

if TYPE_CHECKING:
    from tests.support.model_server import ScriptedModel

LEASE = "2"
HEARTBEAT = "0.4"
#: A worker whose heartbeat stops where it would learn that a claim was lost (failpoint
#: cluster.renewal_lost, freeze): its late write is what finds out, refused by the fence.
HOLD_HEARTBEAT = {
    "A0_CRASH_AT": "cluster.renewal_lost",
    "A0_CRASH_MODE": "freeze",
    "A0_CRASH_FREEZE_SECONDS": "300",
}


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
