"""Bad model behaviour ends with a clear message in the chat, never a server crash."""

from __future__ import annotations

import httpx
import pytest

from tests.integration._helpers import (
    assert_healthy,
    chat_log,
    log_text,
    request_text,
    wait_until,
)
from tests.support.model_server import ScriptedFailure

pytestmark = pytest.mark.integration


def _send(server, text: str) -> httpx.Response:
    return server.api_message(text)


def _context_of(server) -> str:
    with server.ui_client() as client:
        contexts = client.post("/api/poll", json={}).json()["contexts"]
    assert len(contexts) == 1
    return contexts[0]["id"]


def test_malformed_model_output_gets_a_warning_and_the_turn_goes_on(running_ui, model_server):
    model_server.reply("I will not answer in JSON, sorry.")
    model_server.tool("response", {"text": "Recovered after the warning."})

    response = _send(running_ui, "hello")

    assert response.status_code == 200, response.text
    assert response.json()["response"] == "Recovered after the warning."
    items = chat_log(running_ui, response.json()["context_id"])
    warnings = [item for item in items if item["type"] == "warning"]
    assert warnings and warnings[0]["content"], log_text(items)
    # the model was told the same thing the user sees
    assert warnings[0]["content"] in request_text(model_server.requests[1])
    assert_healthy(running_ui)


def test_unknown_tool_is_reported_to_the_model_and_the_chat(running_ui, model_server):
    model_server.tool("no_such_tool", {"x": 1})
    model_server.tool("response", {"text": "Used a real tool instead."})

    response = _send(running_ui, "hello")

    assert response.status_code == 200, response.text
    assert response.json()["response"] == "Used a real tool instead."
    assert "no_such_tool" in request_text(model_server.requests[1])
    text = log_text(chat_log(running_ui, response.json()["context_id"]))
    assert "no_such_tool" in text
    assert_healthy(running_ui)


def test_model_http_500_holds_the_run_with_a_warning_in_the_chat(running_ui, model_server):
    """With the journal a failed model call is retried only through a retry grant: the run
    is held (model_failed) and the chat shows why (docs/recovery.md)."""
    model_server.respond_with(lambda body: ScriptedFailure(500, "provider exploded"))

    response = _send(running_ui, "hello")

    assert response.headers["content-type"].startswith("application/json")
    assert "Traceback" not in response.text
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "needs_attention"
    assert response.json()["response"] is None
    ctx_id = response.json().get("context_id") or _context_of(running_ui)
    items = wait_until(
        lambda: [i for i in chat_log(running_ui, ctx_id) if i["type"] in ("error", "warning")],
        what="a warning item in the chat log",
    )
    assert "model_failed" in log_text(items)
    assert_healthy(running_ui)
    # and the server still serves a normal turn afterwards (in another chat: this one is held)
    model_server.respond_with(lambda body: {"tool_name": "response", "tool_args": {"text": "ok"}})
    again = _send(running_ui, "try again")
    assert again.status_code == 200, again.text
    assert again.json()["response"] == "ok"
