"""Saved settings are stored literally (issue #17, point 10): an API key whose value is
``${AUTH_PASSWORD}``, saved through /api/settings_set, reads back as exactly that text,
also after a restart; python-dotenv's expansion never turns it into the login password."""

from __future__ import annotations

import httpx
import pytest

from python.helpers.settings import get_api_key, read_env_file
from tests.support.model_server import ScriptedModel
from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

pytestmark = pytest.mark.integration

PASSWORD = "login-pw-5d0c1b7e"
LITERAL = "${AUTH_PASSWORD}"


def _save_key(server: UiServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        client.post("/login", data={"username": "ann", "password": PASSWORD})
        token = client.get("/api/csrf_token").json()["token"]
        saved = client.post(
            "/api/settings_set", json={"api_key_other": LITERAL}, headers={"X-CSRF-Token": token}
        )
        assert saved.status_code == 200, saved.text
        view = client.post("/api/settings_get", json={}, headers={"X-CSRF-Token": token})
        assert view.status_code == 200, view.text
        assert view.json()["api_keys"]["other"] is True
        assert PASSWORD not in view.text


def _bearer(model: ScriptedModel) -> str:
    return model.headers[-1]["authorization"]


def test_a_saved_key_with_a_variable_reads_back_literally(tmp_path, model_server):
    usr = tmp_path / "usr"
    env = ui_env_for(model_server)
    env.pop("API_KEY_OTHER")  # the key comes from usr/.env only
    env.update({"AUTH_LOGIN": "ann", "AUTH_PASSWORD": PASSWORD})
    server = UiServer(usr, env=env)
    model_server.tool("response", {"text": "one"})
    model_server.tool("response", {"text": "two"})
    try:
        server.start(timeout=SLOW_START)
        _save_key(server)
        first = server.api_message("hello")
        assert first.status_code == 200, first.text
        assert _bearer(model_server) == f"Bearer {LITERAL}"  # never the login password
    finally:
        assert server.stop() == 0
    assert read_env_file(usr)["API_KEY_OTHER"] == LITERAL
    assert get_api_key("other", usr, environ={"AUTH_PASSWORD": PASSWORD}) == LITERAL
    try:
        server.start(timeout=SLOW_START)
        second = server.api_message("again")
        assert second.status_code == 200, second.text
        assert _bearer(model_server) == f"Bearer {LITERAL}"
    finally:
        assert server.stop() == 0
    assert PASSWORD not in server.output()
