"""scheduler_* endpoints over the HTTP app on a real SQLite journal (firing: tests/integration)."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from python.server.api import discover_handlers
from python.server.auth import AuthConfig
from python.server.runtime import Runtime
from run_ui import build_app

pytestmark = pytest.mark.unit

TASK = {
    "name": "morning news",
    "prompt": "Summarise the news.",
    "schedule": {"minute": "0", "hour": "7", "timezone": "Europe/Berlin"},
}


@pytest.fixture
def client(tmp_path: Path):
    """The app as run_ui.py builds it: the server opens its journal in usr/ at start."""
    runtime = Runtime(tmp_path, {"mcp_server_token": "tok"}, AuthConfig())
    with TestClient(
        build_app(runtime, discover_handlers()), base_url="http://localhost"
    ) as test_client:
        test_client.headers["X-CSRF-Token"] = test_client.get("/api/csrf_token").json()["token"]
        yield test_client


def error(response) -> dict:
    return response.json()["error"]


def test_create_list_update_delete(client):
    created = client.post("/api/scheduler_task_create", json=TASK)
    assert created.status_code == 200, created.text
    task = created.json()["task"]
    assert (task["type"], task["state"], task["revision"]) == ("scheduled", "idle", 1)
    assert task["schedule"] == {
        "minute": "0",
        "hour": "7",
        "day": "*",
        "month": "*",
        "weekday": "*",
        "timezone": "Europe/Berlin",
    }
    assert task["next_run"].endswith(("06:00:00+00:00", "05:00:00+00:00"))  # 07:00 in Berlin
    assert task["dedicated_context"] is True and task["context_id"] == task["uuid"]

    listed = client.post("/api/scheduler_tasks_list", json={}).json()
    assert listed["ok"] is True and [t["uuid"] for t in listed["tasks"]] == [task["uuid"]]
    assert (
        client.post("/api/scheduler_tasks_list", json={"state": ["disabled"]}).json()["tasks"] == []
    )
    assert (
        len(client.post("/api/scheduler_tasks_list", json={"type": ["scheduled"]}).json()["tasks"])
        == 1
    )

    updated = client.post(
        "/api/scheduler_task_update",
        json={"task_id": task["uuid"], "expected_revision": 1, "prompt": "Only headlines."},
    )
    assert updated.status_code == 200, updated.text
    assert (updated.json()["task"]["prompt"], updated.json()["task"]["revision"]) == (
        "Only headlines.",
        2,
    )
    stale = client.post(
        "/api/scheduler_task_update",
        json={"uuid": task["uuid"], "revision": 1, "prompt": "Something else."},
    )
    assert stale.status_code == 409
    assert error(stale)["code"] == "task_conflict"
    assert (error(stale)["expected_revision"], error(stale)["current_revision"]) == (1, 2)

    gone = client.post("/api/scheduler_task_delete", json={"task_id": task["uuid"]})
    assert gone.json() == {"ok": True, "deleted": task["uuid"]}
    missing = client.post("/api/scheduler_task_delete", json={"task_id": task["uuid"]})
    assert (missing.status_code, error(missing)["code"]) == (404, "task_not_found")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**TASK, "schedule": {"minute": "75"}}, "schedule.minute"),
        ({**TASK, "timezone": "Atlantis/Capital"}, "timezone"),
        ({**TASK, "name": ""}, "name"),
        ({"name": "p", "prompt": "x", "type": "planned", "plan": ["next tuesday"]}, "plan[0]"),
        ({"name": "p", "prompt": "x", "type": "weekly"}, "kind"),
        ({**TASK, "colour": "blue"}, "colour"),
    ],
)
def test_invalid_tasks_are_refused_with_the_field(client, body, field):
    response = client.post("/api/scheduler_task_create", json=body)
    assert response.status_code == 400, response.text
    assert (error(response)["code"], error(response)["field"]) == ("task_invalid", field)
    assert client.post("/api/scheduler_tasks_list", json={}).json()["tasks"] == []


def test_update_needs_a_revision_and_an_id(client):
    task = client.post("/api/scheduler_task_create", json=TASK).json()["task"]
    no_revision = client.post("/api/scheduler_task_update", json={"task_id": task["uuid"]})
    assert (no_revision.status_code, error(no_revision)["field"]) == (400, "expected_revision")
    no_id = client.post("/api/scheduler_task_update", json={"expected_revision": 1})
    assert (no_id.status_code, error(no_id)["field"]) == (400, "task_id")


def test_a_client_task_id_makes_creation_idempotent(client):
    first = client.post("/api/scheduler_task_create", json={**TASK, "task_id": "news-1"})
    again = client.post("/api/scheduler_task_create", json={**TASK, "task_id": "news-1"})
    assert first.json()["task"]["uuid"] == again.json()["task"]["uuid"] == "news-1"
    other = client.post(
        "/api/scheduler_task_create", json={**TASK, "task_id": "news-1", "prompt": "Other."}
    )
    assert (other.status_code, error(other)["code"]) == (409, "task_exists")


def test_the_api_key_works_and_tick_answers_only_loopback(client):
    headers = {"X-API-KEY": "tok", "X-CSRF-Token": ""}
    listed = client.post("/api/scheduler_tasks_list", json={}, headers=headers)
    assert listed.status_code == 200
    tick = client.post("/api/scheduler_tick", json={})
    assert (tick.status_code, error(tick)["code"]) == (403, "forbidden")  # "testclient" host
