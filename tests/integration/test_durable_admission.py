"""Admission through the journal over HTTP: duplicates, conflicts, interventions."""

from __future__ import annotations

import threading

import pytest

from tests.integration._helpers import chat_log, log_text, wait_until

pytestmark = pytest.mark.integration


def test_duplicate_input_id_returns_the_recorded_response_without_a_model_call(
    running_ui, model_server
):
    model_server.tool("response", {"text": "first answer"})
    first = running_ui.api_message("hello", input_id="dup-1")
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["status"] == "completed"
    assert body["response"] == "first answer"
    assert body["input_id"] == "dup-1" and body["run_id"]
    calls = model_server.calls

    again = running_ui.api_message("hello", input_id="dup-1", context_id=body["context_id"])

    assert again.status_code == 200, again.text
    assert again.json() == body
    assert model_server.calls == calls  # nothing ran
    items = chat_log(running_ui, body["context_id"])
    assert [i["type"] for i in items].count("user") == 1


def test_same_input_id_with_other_content_is_a_conflict(running_ui, model_server):
    model_server.tool("response", {"text": "ok"})
    body = running_ui.api_message("hello", input_id="conf-1").json()
    calls = model_server.calls

    other = running_ui.api_message(
        "something else", input_id="conf-1", context_id=body["context_id"]
    )

    assert other.status_code == 409, other.text
    assert other.json()["error"]["code"] == "input_conflict"
    assert model_server.calls == calls


def test_ui_message_endpoints_admit_through_the_journal(running_ui, model_server):
    model_server.tool("response", {"text": "from the ui"})
    with running_ui.ui_client() as client:
        first = client.post("/api/message", json={"text": "hi", "message_id": "ui-1"})
        assert first.status_code == 200, first.text
        body = first.json()
        assert body["message"] == "from the ui" and body["status"] == "completed"
        calls = model_server.calls
        again = client.post(
            "/api/message", json={"text": "hi", "message_id": "ui-1", "context": body["context"]}
        )
        assert again.status_code == 200, again.text
        assert again.json()["message"] == "from the ui"
        assert again.json()["run_id"] == body["run_id"]
        conflict = client.post(
            "/api/message_async",
            json={"text": "changed", "message_id": "ui-1", "context": body["context"]},
        )
        assert conflict.status_code == 409
        assert conflict.json()["error"]["code"] == "input_conflict"
    assert model_server.calls == calls


def test_a_message_during_a_run_is_journaled_as_an_intervention(running_ui, model_server):
    release = threading.Event()

    def slow_then_answer(body: dict) -> dict:
        release.wait(60)
        return {"tool_name": "response", "tool_args": {"text": "done after the nudge"}}

    model_server.respond_with(slow_then_answer)
    results: dict = {}
    sender = threading.Thread(
        target=lambda: results.update(first=running_ui.api_message("long job", input_id="run-a"))
    )
    sender.start()
    try:
        model_server.wait_for_calls(1, timeout=60)
        ctx_id = wait_until(lambda: _only_chat(running_ui), what="the chat")
        with running_ui.ui_client() as client:
            extra = client.post(
                "/api/message_async",
                json={"text": "also do this", "message_id": "int-1", "context": ctx_id},
            )
        assert extra.status_code == 200, extra.text
        assert extra.json()["kind"] == "intervention"
    finally:
        release.set()
        sender.join(120)
    first = results["first"]
    assert first.status_code == 200, first.text
    assert extra.json()["run_id"] == first.json()["run_id"]
    assert "also do this" in log_text(chat_log(running_ui, first.json()["context_id"]))


def _only_chat(server) -> str | None:
    with server.ui_client() as client:
        contexts = client.post("/api/poll", json={}).json()["contexts"]
    return contexts[0]["id"] if contexts else None


def test_a_retry_without_the_chat_id_returns_the_recorded_answer(running_ui, model_server):
    """The client's first answer was lost, so it does not know the chat: same input id."""
    model_server.tool("response", {"text": "only-once"})
    first = running_ui.api_message("job", input_id="retry-1")
    assert first.status_code == 200, first.text
    calls = model_server.calls
    again = running_ui.api_message("job", input_id="retry-1")
    assert again.status_code == 200, again.text
    body = again.json()
    assert (body["context_id"], body["response"]) == (first.json()["context_id"], "only-once")
    assert model_server.calls == calls
