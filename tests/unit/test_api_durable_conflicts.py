"""durable_conflicts / durable_conflict_resolve over the HTTP app, on a real SQLite journal."""

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

CHAT = "chat-1"
AGENT_PLAN = {"title": "Trip", "items": [{"id": "a", "text": "Book the train", "done": False}]}
USER_PLAN = {"title": "Trip", "items": [{"id": "a", "text": "Book the train", "done": True}]}


@pytest.fixture
def client(tmp_path: Path):
    runtime = Runtime(tmp_path, {"mcp_server_token": "tok"}, AuthConfig())
    with TestClient(
        build_app(runtime, discover_handlers()), base_url="http://localhost"
    ) as test_client:
        test_client.headers["X-CSRF-Token"] = test_client.get("/api/csrf_token").json()["token"]
        test_client.runtime = runtime  # type: ignore[attr-defined]
        yield test_client


@pytest.fixture
def journal(client) -> Journal:
    """The server's own journal (opened at its start)."""
    return client.runtime.journal


@pytest.fixture
def conflict_id(journal: Journal) -> int:
    """The agent wrote revision 1; the person's edit, made on revision 0, was refused."""
    journal.replace_document(CHAT, "plan", AGENT_PLAN, expected_revision=0, actor="agent0")
    with pytest.raises(Exception, match="changed since it was read"):
        journal.replace_document(CHAT, "plan", USER_PLAN, expected_revision=0, actor="user")
    (conflict,) = journal.list_conflicts(CHAT)
    return conflict.id


def _resolve(client, conflict_id, resolution, **extra):
    body = {"conflict_id": conflict_id, "resolution": resolution, **extra}
    return client.post("/api/durable_conflict_resolve", json=body)


def test_list_open_conflicts_then_all(client, journal, conflict_id):
    rows = client.post("/api/durable_conflicts", json={"context_id": CHAT}).json()["conflicts"]
    assert [(r["id"], r["kind"], r["actor"], r["proposed"]) for r in rows] == [
        (conflict_id, "plan", "user", USER_PLAN)
    ]
    assert (rows[0]["expected_revision"], rows[0]["actual_revision"]) == (0, 1)
    assert rows[0]["resolved_at"] is None
    assert client.post("/api/durable_conflicts", json={"context_id": "other"}).json() == {
        "conflicts": []
    }
    assert _resolve(client, conflict_id, "keep_current").status_code == 200
    assert client.post("/api/durable_conflicts", json={}).json()["conflicts"] == []
    every = client.post("/api/durable_conflicts", json={"include_resolved": True}).json()
    assert [r["resolution"] for r in every["conflicts"]] == ["kept_current"]
    assert every["conflicts"][0]["resolved_by"] == "user:ui"


def test_keep_current_writes_nothing(client, journal, conflict_id):
    answer = _resolve(client, conflict_id, "keep_current")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["applied"], body["revision"], body["plan"]) == (True, 1, AGENT_PLAN)
    assert body["conflict"]["resolution"] == "kept_current"


def test_take_proposed_stores_the_refused_value(client, journal, conflict_id):
    answer = _resolve(client, conflict_id, "take_proposed", expected_revision=1)
    assert answer.status_code == 200, answer.text
    assert (answer.json()["revision"], answer.json()["plan"]) == (2, USER_PLAN)
    assert journal.read_document(CHAT).updated_by == "user"
    again = _resolve(client, conflict_id, "take_proposed", expected_revision=1)
    assert again.status_code == 200 and again.json()["applied"] is False
    assert journal.read_document(CHAT).revision == 2


def test_merge_stores_the_persons_plan(client, journal, conflict_id):
    merged = {"title": "Trip", "items": [*USER_PLAN["items"], {"id": "b", "text": "Pack"}]}
    answer = _resolve(client, conflict_id, "merge", expected_revision=1, plan=merged)
    assert answer.status_code == 200, answer.text
    assert answer.json()["plan"]["items"][1] == {"id": "b", "text": "Pack", "done": False}
    assert answer.json()["conflict"]["resolution"] == "merged"
    assert journal.list_conflicts(CHAT) == []


def test_a_stale_resolution_writes_nothing_and_records_nothing(client, journal, conflict_id):
    journal.replace_document(
        CHAT, "plan", {"title": "Later", "items": []}, expected_revision=1, actor="agent0"
    )
    answer = _resolve(client, conflict_id, "take_proposed", expected_revision=1)
    assert answer.status_code == 409
    error = answer.json()["error"]
    assert (error["code"], error["current_revision"]) == ("stale_revision", 2)
    assert journal.read_document(CHAT).revision == 2
    assert [c.id for c in journal.list_conflicts(CHAT)] == [conflict_id]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({}, 400, "bad_request"),
        ({"conflict_id": "x", "resolution": "keep_current"}, 400, "bad_request"),
        ({"conflict_id": 999, "resolution": "keep_current"}, 404, "conflict_not_found"),
        ({"resolution": "flip"}, 400, "bad_request"),
        ({"resolution": ["keep_current"]}, 400, "bad_request"),
        ({"resolution": "merge", "expected_revision": 1}, 400, "bad_request"),
        ({"resolution": "take_proposed"}, 400, "bad_request"),
        (
            {"resolution": "merge", "expected_revision": 1, "plan": {"items": [{"id": ""}]}},
            400,
            "document_invalid",
        ),
    ],
)
def test_bad_input_is_refused(client, journal, conflict_id, body, status, code):
    body = {"conflict_id": conflict_id, **body}
    answer = client.post("/api/durable_conflict_resolve", json=body)
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), answer.text
    assert journal.read_document(CHAT).revision == 1
    assert [c.id for c in journal.list_conflicts(CHAT)] == [conflict_id]


def test_an_api_key_is_accepted(client, conflict_id):
    del client.headers["X-CSRF-Token"]
    rows = client.post("/api/durable_conflicts", json={}, headers={"X-API-KEY": "tok"})
    assert rows.status_code == 200 and len(rows.json()["conflicts"]) == 1
