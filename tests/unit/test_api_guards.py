"""Login, CSRF, origin and API-key guards, through the real Starlette app (in process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from python.helpers.errors import ChatNotFound
from python.server.api import ApiHandler
from python.server.auth import AuthConfig, origin_allowed
from python.server.runtime import Runtime
from run_ui import build_app, parse_args

pytestmark = pytest.mark.unit


class Echo(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        return {"echo": input}


class External(ApiHandler):
    requires_auth = False
    requires_csrf = False
    requires_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        return {"ok": True}


class Boom(ApiHandler):
    requires_auth = False
    requires_csrf = False

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        raise ChatNotFound("Chat 'nope' not found.")


def _client(tmp_path: Path, auth: AuthConfig | None = None, token: str = "tok") -> TestClient:
    from python.api.csrf_token import CsrfToken
    from python.api.health import Health

    runtime = Runtime(tmp_path, {"mcp_server_token": token}, auth or AuthConfig())
    handlers = {
        "echo": Echo,
        "external": External,
        "boom": Boom,
        "csrf_token": CsrfToken,
        "health": Health,
    }
    return TestClient(build_app(runtime, handlers), base_url="http://localhost")


def _token(client: TestClient) -> str:
    response = client.get("/api/csrf_token")
    assert response.status_code == 200, response.text
    return response.json()["token"]


def test_ui_endpoint_without_csrf_token_is_403(tmp_path):
    with _client(tmp_path) as client:
        response = client.post("/api/echo", json={"a": 1})
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "csrf_failed"


def test_ui_endpoint_with_csrf_token_passes(tmp_path):
    with _client(tmp_path) as client:
        token = _token(client)
        response = client.post("/api/echo", json={"a": 1}, headers={"X-CSRF-Token": token})
        assert response.status_code == 200
        assert response.json() == {"echo": {"a": 1}}
        wrong = client.post("/api/echo", json={}, headers={"X-CSRF-Token": token + "x"})
        assert wrong.status_code == 403


def test_foreign_origin_is_refused_when_login_is_off(tmp_path):
    with _client(tmp_path) as client:
        token = _token(client)
        headers = {"X-CSRF-Token": token, "Origin": "https://evil.example"}
        response = client.post("/api/echo", json={}, headers=headers)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "forbidden"
        refused = client.get("/api/csrf_token", headers={"Origin": "https://evil.example"})
        assert refused.status_code == 403


def test_origin_rules():
    config = AuthConfig(allowed_origins=("https://a0.example", "http://lan-box:*"))
    assert origin_allowed("http://localhost:5000", AuthConfig())
    assert origin_allowed("http://127.0.0.1:8080", AuthConfig())
    assert not origin_allowed("http://evil.example", AuthConfig())
    assert origin_allowed("https://a0.example", config)
    assert origin_allowed("http://lan-box:9000", config)
    assert not origin_allowed("https://a0.example.evil", config)
    assert not origin_allowed("not a url", config)


def test_login_required_gives_401_json_then_session_works(tmp_path):
    auth = AuthConfig.from_password("ann", "pw")
    with _client(tmp_path, auth) as client:
        response = client.post("/api/echo", json={})
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"
        assert client.get("/api/csrf_token").status_code == 401
        bad = client.post("/login", data={"username": "ann", "password": "no"})
        assert bad.url.path == "/login"
        assert client.get("/api/csrf_token").status_code == 401
        client.post("/login", data={"username": "ann", "password": "pw"}, follow_redirects=False)
        token = _token(client)
        ok = client.post("/api/echo", json={"x": 1}, headers={"X-CSRF-Token": token})
        assert ok.status_code == 200
        client.get("/logout", follow_redirects=False)
        assert client.post("/api/echo", json={}).status_code == 401


def test_auth_config_reads_usr_env(tmp_path):
    (tmp_path / ".env").write_text("AUTH_LOGIN=bob\nAUTH_PASSWORD=secret\n")
    config = AuthConfig.load(tmp_path, environ={})
    assert config.login_required
    assert config.check_credentials("bob", "secret")
    assert not config.check_credentials("bob", "wrong")
    assert "secret" not in repr(config)
    assert not AuthConfig.load(tmp_path / "none", environ={}).login_required


@pytest.mark.parametrize(
    ("token", "headers", "body", "status"),
    [
        ("tok", {}, {}, 401),
        ("tok", {"X-API-KEY": "wrong"}, {}, 401),
        ("", {"X-API-KEY": ""}, {}, 401),
        ("", {}, {"api_key": ""}, 401),
        ("tok", {"X-API-KEY": "tok"}, {}, 200),
        ("tok", {}, {"api_key": "tok"}, 200),
    ],
)
def test_external_api_key(tmp_path, token, headers, body, status):
    with _client(tmp_path, token=token) as client:
        response = client.post("/api/external", json=body, headers=headers)
        assert response.status_code == status
        if status == 401:
            assert response.json()["error"]["code"] == "unauthorized"


def test_errors_and_bad_bodies_are_json(tmp_path):
    with _client(tmp_path) as client:
        response = client.post("/api/boom", json={})
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "context_not_found"
        token = _token(client)
        headers = {"X-CSRF-Token": token, "Content-Type": "application/json"}
        for raw in (b"[1, 2]", b"{not json", b'"text"'):
            bad = client.post("/api/echo", content=raw, headers=headers)
            assert bad.status_code == 400
            assert bad.json()["error"]["code"] == "bad_request"
        missing = client.post("/api/nothing_here", json={})
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "not_found"
        wrong_method = client.get("/api/echo")
        assert wrong_method.status_code == 405
        assert wrong_method.json()["error"]["code"] == "method_not_allowed"
        assert client.get("/api/health").json()["ok"] is True


def test_run_ui_args_accept_extra_key_values(monkeypatch):
    monkeypatch.delenv("WEB_UI_PORT", raising=False)
    monkeypatch.delenv("WEB_UI_HOST", raising=False)
    args, extras = parse_args(["--dockerized=true", "--port", "8123", "--development"])
    assert (args.host, args.port) == ("127.0.0.1", 8123)
    assert extras == {"dockerized": "true", "development": "true"}
    monkeypatch.setenv("WEB_UI_PORT", "6001")
    monkeypatch.setenv("WEB_UI_HOST", "0.0.0.0")
    args, _ = parse_args([])
    assert (args.host, args.port) == ("0.0.0.0", 6001)
