"""CSRF, the external API key and JSON errors on a real run_ui.py process."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.integration


def test_ui_endpoint_without_csrf_token_is_refused(running_ui):
    response = httpx.post(f"{running_ui.url}/api/message", json={"text": "hi"}, timeout=10)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "csrf_failed"


def test_ui_endpoint_from_foreign_origin_is_refused(running_ui):
    with running_ui.ui_client() as client:
        response = client.post(
            "/api/chat_create", json={}, headers={"Origin": "https://evil.example"}
        )
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "forbidden"


@pytest.mark.parametrize("headers", [{}, {"X-API-KEY": "wrong"}])
def test_api_message_without_the_right_key_is_refused(running_ui, model_server, headers):
    response = httpx.post(
        f"{running_ui.url}/api/api_message", json={"message": "hi"}, headers=headers, timeout=10
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert model_server.calls == 0


def test_bad_input_is_400_json_not_a_trace(running_ui):
    with running_ui.ui_client() as client:
        for body in ({"text": 5}, {"text": "hi", "context": ["x"]}, {"text": ""}):
            response = client.post("/api/message", json=body)
            assert response.status_code == 400, response.text
            assert response.json()["error"]["code"] == "bad_request"
        missing = client.post("/api/poll", json={"context": "nope", "log_from": 0})
        assert missing.status_code == 200 and missing.json()["deselect_chat"] is True
        gone = client.post("/api/chat_reset", json={"context": "nope"})
        assert gone.status_code == 404
        assert gone.json()["error"]["code"] == "context_not_found"
        assert "Traceback" not in gone.text


def test_login_protects_the_ui_api(ui_server, model_server):
    from tests.support.ui_server import ui_env_for

    ui_server.env.update(ui_env_for(model_server))
    ui_server.env.update({"AUTH_LOGIN": "ann", "AUTH_PASSWORD": "s3cret"})
    ui_server.start(timeout=60)
    with httpx.Client(base_url=ui_server.url, timeout=10) as client:
        assert client.post("/api/poll", json={}).status_code == 401
        assert client.get("/").status_code == 303
        client.post("/login", data={"username": "ann", "password": "s3cret"})
        token = client.get("/api/csrf_token").json()["token"]
        poll = client.post("/api/poll", json={}, headers={"X-CSRF-Token": token})
        assert poll.status_code == 200
        assert poll.json()["contexts"] == []
    assert ui_server.stop() == 0
    assert "s3cret" not in ui_server.output()
