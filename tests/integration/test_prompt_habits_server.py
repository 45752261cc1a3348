"""Prompt habits through the real server (#23): api_message's ``agent_profile`` chooses the
profile of the chat it makes (its specifics and nothing of another profile reach the model),
the chat keeps it across a restart, and an unknown profile is refused; the secrets prompt
and the time come along in the same requests."""

from __future__ import annotations

import re

import pytest

from tests.integration._helpers import request_text
from tests.support.model_server import ScriptedModel
from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

pytestmark = pytest.mark.integration


def _install(usr) -> None:
    folder = usr / "agents" / "auditor"
    (folder / "prompts").mkdir(parents=True)
    (folder / "_context.md").write_text("Audits accounts.\n", encoding="utf-8")
    (folder / "prompts" / "agent.system.main.specifics.md").write_text(
        "You are AUDITOR-SPECIFICS.\n", encoding="utf-8"
    )
    (usr / "secrets.env").write_text("LEDGER_KEY=ledger-0a1b2c3d4e5f\n", encoding="utf-8")


def test_agent_profile_in_api_message_survives_a_restart(tmp_path, model_server: ScriptedModel):
    usr = tmp_path / "usr"
    _install(usr)
    env = ui_env_for(model_server)
    server = UiServer(usr, env=env)
    model_server.tool("response", {"text": "first"})
    model_server.tool("response", {"text": "plain"})
    try:
        server.start(timeout=SLOW_START)
        refused = server.api_message("hi", agent_profile="no_such_profile")
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "bad_request"
        assert refused.json()["error"]["field"] == "agent_profile"
        assert model_server.calls == 0

        reply = server.api_message("audit this", agent_profile="auditor")
        assert reply.status_code == 200, reply.text
        ctx = reply.json()["context_id"]
        other = server.api_message("no profile given")  # a new chat: the settings' profile
        assert other.json()["response"] == "plain"
    finally:
        server.stop()
    first, plain = (request_text(r) for r in model_server.requests[:2])
    assert "AUDITOR-SPECIFICS" in first and "AUDITOR-SPECIFICS" not in plain
    assert "§§secret(LEDGER_KEY)" in first and "ledger-0a1b2c3d4e5f" not in first
    assert re.search(r"current local date and time: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", first)

    server = UiServer(usr, env=env)
    model_server.tool("response", {"text": "second"})
    try:
        server.start(timeout=SLOW_START)
        again = server.api_message("and now?", context_id=ctx)
        assert again.status_code == 200, again.text
        assert again.json()["response"] == "second"
    finally:
        server.stop()
    assert "AUDITOR-SPECIFICS" in request_text(model_server.requests[-1])
