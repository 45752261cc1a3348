"""The Host allowlist and origin checks on reads (#17, point 4): a DNS-rebinding page
(a foreign Host, no Origin) gets no CSRF token and reads no files or settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from python.server.api import discover_handlers
from python.server.auth import AuthConfig
from python.server.hosts import HostAllowlist, host_name
from python.server.runtime import Runtime
from run_ui import build_app

pytestmark = pytest.mark.unit


@pytest.fixture
def app(tmp_path: Path):
    (tmp_path / ".env").write_text("ALLOWED_HOSTS=a0.lan,*.box.example\n")
    runtime = Runtime(tmp_path, {"mcp_server_token": "tok"}, AuthConfig.load(tmp_path, {}))
    return build_app(runtime, discover_handlers())


def _read_a_file_and_the_settings(client: TestClient) -> list[int]:
    chat = {"context": "nope"}
    return [
        client.get("/api/csrf_token").status_code,
        client.post("/api/settings_get", json={}).status_code,
        client.get("/api/download_work_dir_file", params={**chat, "path": "x"}).status_code,
        client.post("/api/poll", json=chat).status_code,
        client.get("/").status_code,
    ]


def test_a_rebinding_page_gets_no_token_and_reads_nothing(app):
    with TestClient(app, base_url="http://evil.example:5000") as client:
        response = client.get("/api/csrf_token")
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "host_not_allowed"
        assert "token" not in response.text
        assert "set-cookie" not in response.headers
        assert set(_read_a_file_and_the_settings(client)) == {400}


@pytest.mark.parametrize("base", ["http://localhost:5000", "http://a0.lan", "http://x.box.example"])
def test_allowed_hosts_are_served(app, base):
    with TestClient(app, base_url=base) as client:
        token = client.get("/api/csrf_token").json()["token"]
        client.headers["X-CSRF-Token"] = token
        assert client.post("/api/settings_get", json={}).status_code == 200


def test_reads_with_a_foreign_origin_are_refused_like_writes(app):
    with TestClient(app, base_url="http://localhost:5000") as client:
        token = client.get("/api/csrf_token").json()["token"]
        client.headers["X-CSRF-Token"] = token
        client.headers["Origin"] = "https://evil.example"
        for response in (
            client.get("/api/csrf_token"),
            client.post("/api/settings_get", json={}),
            client.get("/api/download_work_dir_file", params={"context": "c", "path": "x"}),
        ):
            assert response.status_code == 403, response.text
            assert response.json()["error"]["code"] == "forbidden"
        client.headers["Origin"] = "http://localhost:5000"  # its own origin
        assert client.post("/api/settings_get", json={}).status_code == 200


def test_the_bind_address_is_an_allowed_host_unless_it_is_every_interface(tmp_path):
    assert "192.0.2.10" in AuthConfig.load(tmp_path, {}, bind_host="192.0.2.10").allowed_hosts
    every = AuthConfig.load(tmp_path, {"A0_ALLOW_NO_LOGIN": "true"}, bind_host="0.0.0.0")
    assert "0.0.0.0" not in every.allowed_hosts
    origins = AuthConfig.load(tmp_path, {"ALLOWED_ORIGINS": "https://a0.example,http://box:*"})
    assert {"a0.example", "box"} <= set(origins.allowed_hosts)


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:5000", "localhost"),
        ("LOCALHOST", "localhost"),
        ("[::1]:80", "::1"),
        ("[::1]", "::1"),
        ("a0.lan:x", None),
        ("evil.example@localhost", None),
        ("", None),
        ("[::1", None),
    ],
)
def test_host_header_parsing(header, name):
    assert host_name(header) == name


def test_wildcards():
    hosts = HostAllowlist(None, allowed=["*.box.example"])  # type: ignore[arg-type]
    assert hosts.allows("a.box.example:80") and hosts.allows("127.0.0.1")
    assert not hosts.allows("box.example.evil") and not hosts.allows("evilbox.example")
    assert HostAllowlist(None, allowed=["*"]).allows("anything")  # type: ignore[arg-type]
