"""settings_get / settings_set over the HTTP app: field types, and errors that name fields."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from python.helpers import settings as settings_mod
from python.server.api import discover_handlers
from python.server.auth import AuthConfig
from python.server.runtime import Runtime
from run_ui import build_app

pytestmark = pytest.mark.unit


@pytest.fixture
def client(tmp_path: Path, monkeypatch):
    for key in [k for k in os.environ if k.upper().startswith("A0_SET_")]:
        monkeypatch.delenv(key)
    runtime = Runtime(tmp_path, dict(settings_mod.DEFAULTS), AuthConfig())
    with TestClient(
        build_app(runtime, discover_handlers()), base_url="http://localhost"
    ) as test_client:
        test_client.headers["X-CSRF-Token"] = test_client.get("/api/csrf_token").json()["token"]
        yield test_client


def test_the_view_describes_every_setting(client):
    view = client.post("/api/settings_get", json={}).json()
    assert set(view["fields"]) == set(settings_mod.DEFAULTS)
    assert view["fields"]["chat_model_ctx_length"] == {
        "type": "integer",
        "default": 128000,
        "secret": False,
    }
    assert view["fields"]["chat_model_ctx_history"]["type"] == "number"
    assert view["fields"]["chat_model_kwargs"]["type"] == "object"
    assert view["fields"]["mcp_server_token"] == {"type": "text", "default": "", "secret": True}
    assert view["env_defaults"] == []


def test_env_defaults_are_listed_and_a_saved_value_wins(client, monkeypatch, tmp_path):
    monkeypatch.setenv("A0_SET_RETENTION_DAYS", "9")
    (tmp_path / ".env").write_text("A0_SET_retention_runs=5\n")
    view = client.post("/api/settings_get", json={}).json()
    assert view["env_defaults"] == ["retention_days", "retention_runs"]
    assert view["settings"]["retention_days"] == 9 and view["settings"]["retention_runs"] == 5
    saved = client.post("/api/settings_set", json={"settings": {"retention_days": 3}}).json()
    assert saved["settings"]["retention_days"] == 3  # upstream: A0_SET_ is only the default


def test_invalid_values_name_every_field_and_nothing_is_saved(client, tmp_path):
    changes = {
        "chat_model_ctx_history": "2",
        "code_exec_max_timeout": "soon",
        "util_model_kwargs": "[1]",
        "retention_days": "7",
    }
    response = client.post("/api/settings_set", json={"settings": changes})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_setting"
    assert error["field"] == "chat_model_ctx_history"
    assert set(error["fields"]) == {
        "chat_model_ctx_history",
        "code_exec_max_timeout",
        "util_model_kwargs",
    }
    assert "at most 1" in error["fields"]["chat_model_ctx_history"]
    assert not (tmp_path / "settings.json").exists()


def test_text_values_are_parsed_to_the_setting_type(client, tmp_path):
    changes = {
        "retention_days": "7",
        "chat_model_kwargs": '{"temperature": 0}',
        "chat_model_ctx_history": "0.5",
        "agent_profile": "developer",
    }
    response = client.post("/api/settings_set", json={"settings": changes})
    assert response.status_code == 200, response.text
    stored = json.loads((tmp_path / "settings.json").read_text())
    assert stored["retention_days"] == 7
    assert stored["chat_model_kwargs"] == {"temperature": 0}
    assert stored["chat_model_ctx_history"] == 0.5
    assert response.json()["settings"]["agent_profile"] == "developer"


def test_an_unknown_setting_is_named(client):
    response = client.post("/api/settings_set", json={"settings": {"colour": "blue"}})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("bad_request", "colour")
