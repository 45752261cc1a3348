"""durable_plan_get / durable_plan_set over the HTTP app, on a real SQLite journal."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from durability import Journal
from python.server.api import discover_handlers
from python.server.auth import AuthConfig
from python.server.runtime import Runtime
from run_ui import build_app

pytestmark = pytest.mark.unit

PLAN = {"title": "Trip", "items": [{"id": "a", "text": "Book the train", "done": False}]}


def _client(tmp_path: Path) -> TestClient:
    runtime = Runtime(tmp_path, {"mcp_server_token": "tok"}, AuthConfig())
    client = TestClient(build_app(runtime, discover_handlers()), base_url="http://localhost")
    client.runtime = runtime  # type: ignore[attr-defined]
    return client


@pytest.fixture
def client(tmp_path: Path):
    with _client(tmp_path) as test_client:
        test_client.headers["X-CSRF-Token"] = test_client.get("/api/csrf_token").json()["token"]
        yield test_client


@pytest.fixture
def journal(client) -> Journal:
    """The server's own journal (opened at its start)."""
    return client.runtime.journal


@pytest.fixture
def chat(client) -> str:
    """A chat made over HTTP; its id."""
    return client.post("/api/chat_create", json={}).json()["ctxid"]


def _error(response) -> str:
    return response.json()["error"]["code"]


def test_get_of_an_empty_plan(client, chat):
    body = client.post("/api/durable_plan_get", json={"context_id": chat}).json()
    assert body == {
        "context_id": chat,
        "plan": {"title": "", "items": []},
        "revision": 0,
        "conflicts": [],
    }


def test_set_then_get(client, chat, journal):
    answer = client.post(
        "/api/durable_plan_set",
        json={"context_id": chat, "expected_revision": 0, "plan": PLAN},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"context_id": chat, "plan": PLAN, "revision": 1}
    assert journal.read_document(chat).updated_by == "user"
    body = client.post("/api/durable_plan_get", json={"context_id": chat}).json()
    assert (body["plan"], body["revision"]) == (PLAN, 1)


def test_stale_revision_is_409_and_the_conflict_is_listed(client, chat, journal):
    journal.replace_document(chat, "plan", PLAN, expected_revision=0, actor="agent0")
    proposal = {"title": "Mine", "items": []}
    answer = client.post(
        "/api/durable_plan_set",
        json={"context_id": chat, "expected_revision": 0, "plan": proposal},
    )
    assert answer.status_code == 409
    error = answer.json()["error"]
    assert error["code"] == "document_conflict"
    assert "revision 1 is current" in error["message"]
    body = client.post("/api/durable_plan_get", json={"context_id": chat}).json()
    assert body["plan"] == PLAN and body["revision"] == 1
    (conflict,) = body["conflicts"]
    assert conflict["proposed"] == proposal and conflict["actor"] == "user"
    assert (conflict["expected_revision"], conflict["actual_revision"]) == (0, 1)
    assert f"#{conflict['id']}" in error["message"]
    journal.resolve_conflict(conflict["id"], resolution="kept_current", actor="user")
    body = client.post("/api/durable_plan_get", json={"context_id": chat}).json()
    assert body["conflicts"] == []


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({}, 400, "bad_request"),
        ({"context_id": 5}, 400, "bad_request"),
        ({"context_id": "no-such-chat"}, 404, "context_not_found"),
        ({"plan": PLAN}, 400, "bad_request"),
        ({"expected_revision": 0}, 400, "bad_request"),
        ({"expected_revision": -1, "plan": PLAN}, 400, "bad_request"),
        ({"expected_revision": "x", "plan": PLAN}, 400, "bad_request"),
        ({"expected_revision": 0, "plan": "text"}, 400, "bad_request"),
        ({"expected_revision": 0, "plan": {"items": [{"id": ""}]}}, 400, "document_invalid"),
        (
            {"expected_revision": 0, "plan": {"items": [{"id": str(n)} for n in range(101)]}},
            413,
            "document_too_large",
        ),
    ],
)
def test_set_refuses_bad_input(client, chat, journal, body, status, code):
    if "context_id" not in body and body:
        body = {"context_id": chat, **body}
    answer = client.post("/api/durable_plan_set", json=body)
    assert (answer.status_code, _error(answer)) == (status, code), answer.text
    assert "Traceback" not in answer.text
    assert journal.read_document(chat).revision == 0


def test_invalid_plan_names_the_path(client, chat):
    plan = {"items": [{"id": "a", "text": "t", "done": "no"}]}
    answer = client.post(
        "/api/durable_plan_set", json={"context_id": chat, "expected_revision": 0, "plan": plan}
    )
    assert "$.items[0].done" in answer.json()["error"]["message"]


def test_get_unknown_chat_is_404(client):
    answer = client.post("/api/durable_plan_get", json={"context_id": "nope"})
    assert (answer.status_code, _error(answer)) == (404, "context_not_found")


def test_csrf_is_required(tmp_path):
    with _client(tmp_path) as client:
        answer = client.post("/api/durable_plan_get", json={"context_id": "any"})
        assert (answer.status_code, _error(answer)) == (403, "csrf_failed")
