"""A model that cannot be called as configured fails the turn with ``model_not_configured``
before anything is journaled or sent; nothing is held; fixing the setting makes the next
message work (#23, DESIGN.md section 5)."""

from __future__ import annotations

import pytest

from tests.integration._helpers import assert_healthy, chat_log, wait_until
from tests.support.ui_server import SLOW_START, free_port, ui_env_for

pytestmark = pytest.mark.integration


def _runs(server, context_id: str) -> list[dict]:
    with server.ui_client() as client:
        response = client.post("/api/durable_runs", json={"context_id": context_id})
        assert response.status_code == 200, response.text
        return response.json()["runs"]


def _failed_turn(server, reason: str) -> str:
    """Send "hello"; the turn fails with the reason, no run is held, no call journaled."""
    response = server.api_message("hello")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "failed", body
    context_id = body["context_id"]
    errors = wait_until(
        lambda: [i for i in chat_log(server, context_id) if i["type"] == "error"],
        what="the error item",
    )
    kvps = errors[-1]["kvps"]
    assert kvps["code"] == "model_not_configured", errors
    assert kvps["reason"] == reason, errors
    runs = _runs(server, context_id)
    assert [r["status"] for r in runs] == ["failed"], runs
    assert runs[0]["calls"] == [], runs  # checked before the intent: nothing journaled
    return context_id


def test_no_key_fails_the_turn_and_a_key_makes_the_next_message_work(ui_server, model_server):
    ui_server.env.update({"A0_SET_mcp_server_token": "test-token"})  # a fresh install
    ui_server.start(timeout=SLOW_START)
    with ui_server.ui_client() as client:
        problem = client.post("/api/poll", json={}).json()["model_problem"]
    assert problem["code"] == "model_not_configured", problem
    assert problem["reason"] == "no_api_key", problem
    assert problem["setting"] == "API_KEY_OPENAI", problem

    context_id = _failed_turn(ui_server, "no_api_key")
    assert model_server.calls == 0

    settings = {"api_key_other": "test"}
    for prefix in ("chat_model", "util_model"):
        settings |= {
            f"{prefix}_provider": "other",
            f"{prefix}_api_base": model_server.url,
            f"{prefix}_name": "scripted",
        }
    with ui_server.ui_client() as client:
        saved = client.post("/api/settings_set", json=settings)
        assert saved.status_code == 200, saved.text
        assert client.post("/api/poll", json={}).json()["model_problem"] is None
    model_server.tool("response", {"text": "Now I can answer."})
    again = ui_server.api_message("hello again", context_id=context_id)
    assert again.status_code == 200, again.text
    assert again.json()["response"] == "Now I can answer.", again.json()
    assert_healthy(ui_server)


def test_a_refused_connection_fails_the_turn_without_a_hold(ui_server, model_server):
    ui_server.env.update(ui_env_for(model_server))
    closed = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    ui_server.env.update({"A0_SET_chat_model_api_base": closed})
    ui_server.start(timeout=SLOW_START)
    _failed_turn(ui_server, "connection_refused")
    assert model_server.calls == 0
    assert_healthy(ui_server)


def test_an_unknown_provider_and_a_malformed_url_are_named(ui_server, model_server):
    ui_server.env.update(ui_env_for(model_server))
    ui_server.env.update({"A0_SET_chat_model_api_base": "localhost:1234/v1"})
    ui_server.start(timeout=SLOW_START)
    _failed_turn(ui_server, "malformed_api_base")
    with ui_server.ui_client() as client:
        saved = client.post(
            "/api/settings_set",
            json={"chat_model_provider": "no-such-provider", "chat_model_api_base": ""},
        )
        assert saved.status_code == 200, saved.text
    _failed_turn(ui_server, "unknown_provider")
    assert model_server.calls == 0
