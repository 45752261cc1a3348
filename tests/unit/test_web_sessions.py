"""Server-side sessions through the real app: random ids, revocation, cookie flags, and the
password kept only as an scrypt verifier (#17, point 2)."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from python.server import credentials
from python.server.api import ApiHandler
from python.server.auth import AuthConfig
from python.server.runtime import Runtime
from run_ui import build_app

pytestmark = pytest.mark.unit

COOKIE = "a0_session_5000"


class Echo(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        return {"echo": input}


def client_for(tmp_path: Path, auth: AuthConfig, **options: Any) -> TestClient:
    from python.api.csrf_token import CsrfToken

    runtime = Runtime(tmp_path, {"mcp_server_token": "tok"}, auth)
    app = build_app(runtime, {"echo": Echo, "csrf_token": CsrfToken}, cookie_suffix="_5000")
    options.setdefault("base_url", "http://localhost")
    return TestClient(app, follow_redirects=False, **options)


def log_in(client: TestClient, password: str = "pw") -> str:
    response = client.post("/login", data={"username": "ann", "password": password})
    assert response.status_code == 303 and response.headers["location"] == "/", response.text
    return response.cookies[COOKIE]


def test_each_login_gets_its_own_random_session_id_and_no_credential_digest(tmp_path):
    auth = AuthConfig.from_password("ann", "pw")
    with client_for(tmp_path, auth) as first, client_for(tmp_path / "x", auth) as second:
        one, two = log_in(first), log_in(second)
        again = log_in(first)
    assert len({one, two, again}) == 3  # the old scheme gave every login the same value
    for cookie in (one, two, again):
        assert len(cookie) >= 40
        for secret in ("ann:pw", "pw"):
            digest = hashlib.sha256(secret.encode()).hexdigest()
            assert digest not in cookie
            assert digest not in _decoded(cookie)


def _decoded(cookie: str) -> str:
    """What a signed-cookie scheme would reveal: the cookie's base64 payload, decoded."""
    import base64

    payload = cookie.split(".")[0]
    try:
        return base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode("latin-1")
    except ValueError:
        return ""


def test_logout_revokes_the_session_and_a_replayed_cookie_opens_nothing(tmp_path):
    auth = AuthConfig.from_password("ann", "pw")
    with client_for(tmp_path, auth) as client:
        cookie = log_in(client)
        token = client.get("/api/csrf_token").json()["token"]
        assert client.post("/api/echo", json={}, headers={"X-CSRF-Token": token}).status_code == 200
        out = client.get("/logout")
        assert out.status_code == 303 and "Max-Age=0" in out.headers["set-cookie"]
        client.cookies.set(COOKIE, cookie)  # the attacker replays the copied cookie
        assert client.get("/api/csrf_token").status_code == 401
        refused = client.post("/api/echo", json={}, headers={"X-CSRF-Token": token})
        assert refused.status_code == 401
        assert client.get("/").status_code == 303  # back to the login page


def test_a_login_replaces_the_session_it_came_with(tmp_path):
    """A session id planted before login (session fixation) is not the one logged in."""
    with client_for(tmp_path, AuthConfig()) as planted:
        planted.get("/api/csrf_token")
        fixed = planted.cookies[COOKIE]
    # the same journal folder, now with a login: the planted id is of no use
    with client_for(tmp_path, AuthConfig.from_password("ann", "pw")) as client:
        client.cookies.set(COOKIE, fixed)
        assert log_in(client) != fixed
        client.cookies.clear()
        client.cookies.set(COOKIE, fixed)
        assert client.get("/api/csrf_token").status_code == 401


def test_the_cookie_is_httponly_strict_and_secure_only_over_https(tmp_path):
    auth = AuthConfig.from_password("ann", "pw")
    with client_for(tmp_path, auth) as plain:
        flags = plain.post("/login", data={"username": "ann", "password": "pw"})
        header = flags.headers["set-cookie"]
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Secure" not in header
    with client_for(tmp_path, auth, base_url="https://localhost") as tls:
        header = tls.post("/login", data={"username": "ann", "password": "pw"}).headers[
            "set-cookie"
        ]
    assert "Secure" in header


@pytest.mark.parametrize(("peer", "secure"), [("127.0.0.1", True), ("203.0.113.9", False)])
def test_forwarded_proto_counts_only_from_a_trusted_proxy(tmp_path, peer, secure):
    auth = AuthConfig.from_password("ann", "pw")
    with client_for(tmp_path, auth, client=(peer, 4000)) as client:
        response = client.post(
            "/login",
            data={"username": "ann", "password": "pw"},
            headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.7"},
        )
    assert ("Secure" in response.headers["set-cookie"]) is secure


def test_login_off_still_gives_a_session_with_a_csrf_token(tmp_path):
    with client_for(tmp_path, AuthConfig()) as client:
        token = client.get("/api/csrf_token").json()["token"]
        assert client.get("/api/csrf_token").json()["token"] == token  # one session
        assert client.post("/api/echo", json={}, headers={"X-CSRF-Token": token}).status_code == 200


def test_the_password_is_stored_only_as_a_salted_scrypt_verifier(tmp_path):
    env = {"AUTH_LOGIN": "ann", "AUTH_PASSWORD": "correct horse"}
    config = AuthConfig.load(tmp_path, environ=env)
    stored = (tmp_path / credentials.LOGIN_FILE).read_text()
    assert stat.S_IMODE((tmp_path / credentials.LOGIN_FILE).stat().st_mode) == 0o600
    for secret in ("correct horse", "ann:correct horse"):
        assert secret not in stored
        assert hashlib.sha256(secret.encode()).hexdigest() not in stored
    verifier = json.loads(stored)["verifier"]
    assert verifier.startswith("scrypt$") and verifier == config.verifier
    assert "correct horse" not in repr(config)
    assert credentials.make_verifier("correct horse") != verifier  # a random salt each time
    assert config.check_credentials("ann", "correct horse")
    assert not config.check_credentials("ann", "correct horsE")
    assert not config.check_credentials("bob", "correct horse")
    # the same credentials again: the same verifier, so the sessions' generation holds
    assert AuthConfig.load(tmp_path, environ=env).generation == config.generation
    changed = AuthConfig.load(tmp_path, environ={**env, "AUTH_PASSWORD": "new"})
    assert changed.generation != config.generation
    assert changed.previous_generation == config.generation


def test_a_malformed_verifier_matches_nothing():
    assert not credentials.check_verifier("", "")
    assert not credentials.check_verifier("scrypt$1$2$3$x$y", "pw")
    assert not credentials.check_verifier("sha256$abc", "pw")


def test_odd_cookies_of_other_apps_on_the_same_host_do_not_hide_the_session(tmp_path):
    auth = AuthConfig.from_password("ann", "pw")
    with client_for(tmp_path, auth) as client:
        session = log_in(client)
        client.cookies.clear()
        header = f'other="unterminated; x=[1,2]; {COOKIE}={session}; y=\\"z'
        response = client.get("/api/csrf_token", headers={"Cookie": header})
        assert response.status_code == 200, response.text
