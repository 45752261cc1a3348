"""Full system: run_ui.py + scripted model; real shell side effects through the external API."""

from __future__ import annotations

import pytest

from tests.integration._helpers import chat_log, log_text, request_text

pytestmark = pytest.mark.integration


def test_code_execution_then_response_through_api_message(running_ui, model_server, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    model_server.tool(
        "code_execution_tool",
        {"runtime": "terminal", "session": 0, "code": f"cd {work} && echo hello > out.txt"},
        headline="Writing the file",
    )
    model_server.tool("response", {"text": "Wrote out.txt for you."})

    response = running_ui.api_message("Please write hello into out.txt", input_id="in-1")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["response"] == "Wrote out.txt for you."
    assert body["input_id"] == "in-1"
    assert body["context_id"]
    assert (work / "out.txt").read_text().strip() == "hello"
    text = log_text(chat_log(running_ui, body["context_id"]))
    assert "code_execution_tool" in text
    assert "Wrote out.txt for you." in text


def test_input_id_is_generated_when_absent(running_ui, model_server):
    model_server.tool("response", {"text": "hi"})
    body = running_ui.api_message("hello").json()
    assert body["response"] == "hi"
    assert isinstance(body["input_id"], str) and len(body["input_id"]) >= 16


def test_subordinate_answer_returns_to_agent_zero(running_ui, model_server):
    model_server.tool(
        "call_subordinate",
        {"message": "What is 6 times 7?", "reset": "true"},
        headline="Delegating",
    )
    model_server.tool("response", {"text": "The product is 42."})  # agent 1 answers agent 0
    model_server.tool("response", {"text": "My subordinate says: The product is 42."})

    response = running_ui.api_message("Ask a helper what 6 times 7 is")

    assert response.status_code == 200, response.text
    assert response.json()["response"] == "My subordinate says: The product is 42."
    assert model_server.calls == 3
    # the subordinate saw the delegated task; agent 0's last call saw the subordinate's answer
    assert "What is 6 times 7?" in request_text(model_server.requests[1])
    assert "The product is 42." in request_text(model_server.requests[2])
    items = chat_log(running_ui, response.json()["context_id"])
    assert any(item.get("agentno") == 1 for item in items)
