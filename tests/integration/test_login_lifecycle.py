"""Login across restarts of a real run_ui.py (#17, points 2 and 4): sessions outlive a
restart, a changed password ends them, and a public bind with no login makes a one-time
password that is printed once."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.support.ui_server import SLOW_START, UiServer

pytestmark = pytest.mark.integration

PASSWORD_LINE = re.compile(r"password: (\S+)")


def _log_in(server: UiServer, login: str, password: str) -> str:
    """Log in; the session id (the cookie's value)."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        response = client.post("/login", data={"username": login, "password": password})
        assert response.status_code == 303, response.text
        assert response.headers["location"] == "/"
        return str(client.cookies[f"a0_session_{server.port}"])


def _can_read(server: UiServer, session_id: str) -> bool:
    """The session opens the UI API (the cookie is named by the port, which a restart of
    the test's server changes: the value is what counts)."""
    cookies = {f"a0_session_{server.port}": session_id}
    with httpx.Client(base_url=server.url, timeout=30, cookies=cookies) as client:
        return client.get("/api/csrf_token").status_code == 200


def test_sessions_survive_a_restart_and_end_when_the_password_changes(tmp_path: Path):
    server = UiServer(tmp_path / "usr", env={"AUTH_LOGIN": "ann", "AUTH_PASSWORD": "first"})
    try:
        server.start(timeout=SLOW_START)
        session = _log_in(server, "ann", "first")
        assert _can_read(server, session)
        assert server.stop() == 0
        server.start(timeout=SLOW_START)  # same credentials: the session holds
        assert _can_read(server, session)
        assert server.stop() == 0
        server.env["AUTH_PASSWORD"] = "second"
        server.start(timeout=SLOW_START)
        assert not _can_read(server, session)  # the old password's session ended
        assert _can_read(server, _log_in(server, "ann", "second"))
        assert server.stop() == 0
        server.env["AUTH_PASSWORD"] = "first"  # back to the first: its sessions stay ended
        server.start(timeout=SLOW_START)
        assert not _can_read(server, session)
    finally:
        server.kill()
    assert "first" not in server.output() and "second" not in server.output()


def _public(tmp_path: Path, env: dict[str, str] | None = None) -> UiServer:
    """Listens on every interface; the test still talks to it over 127.0.0.1."""
    return UiServer(tmp_path / "usr", env=env, extra_args=["--host", "0.0.0.0"])


def test_a_public_bind_without_login_makes_a_one_time_password(tmp_path: Path):
    server = _public(tmp_path)
    try:
        server.start(timeout=SLOW_START)
        found = PASSWORD_LINE.findall(server.output())
        assert len(found) == 1, server.output()[-3000:]
        password = found[0]
        anonymous = httpx.get(f"{server.url}/api/csrf_token", timeout=30)
        assert anonymous.status_code == 401
        assert _can_read(server, _log_in(server, "admin", password))
        stored = (tmp_path / "usr" / ".login.json").read_text()
        assert (
            password not in stored and (tmp_path / "usr" / ".login.json").stat().st_mode & 0o77 == 0
        )
        assert server.stop() == 0
        server.start(timeout=SLOW_START)  # not made again, not printed again
        assert PASSWORD_LINE.findall(server.output()) == [password]
        assert _can_read(server, _log_in(server, "admin", password))
    finally:
        server.kill()


@pytest.mark.parametrize(("env", "public"), [({}, False), ({"A0_ALLOW_NO_LOGIN": "true"}, True)])
def test_no_one_time_password_on_loopback_or_when_opted_out(tmp_path: Path, env, public):
    server = _public(tmp_path, env) if public else UiServer(tmp_path / "usr", env=env)
    try:
        server.start(timeout=SLOW_START)
        assert httpx.get(f"{server.url}/api/csrf_token", timeout=30).status_code == 200
        assert "password:" not in server.output()
        assert not (tmp_path / "usr" / ".login.json").exists()
    finally:
        server.kill()
