"""Chat endpoints over the HTTP app with the real loop, its journal and the scripted model.

The app runs in-process (Starlette's TestClient: its own event loop in a thread); the
server opens its journal in the test's usr folder at start, as run_ui.py does.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from python.server.api import discover_handlers
from python.server.auth import AuthConfig
from python.server.runtime import Runtime
from run_ui import build_app
from tests.support.model_server import ScriptedModel
from tests.support.model_server import model_server as model_server
from tests.unit.test_agent_loop import _prompt_text, _settings

pytestmark = pytest.mark.unit

TIMEOUT = 30


def _answer_echo(model: ScriptedModel) -> None:
    """Every turn answers at once with the last user text the model saw."""

    def respond(body: dict) -> dict:
        last = str(body["messages"][-1]["content"])
        return {"tool_name": "response", "tool_args": {"text": f"echo: {last[-40:]}"}}

    model.respond_with(respond)


@pytest.fixture
def client(model_server, tmp_path: Path):
    settings = _settings(model_server, tmp_path / "work", mcp_server_token="tok")
    runtime = Runtime(tmp_path / "usr", settings, AuthConfig())
    with TestClient(
        build_app(runtime, discover_handlers()), base_url="http://localhost"
    ) as test_client:
        token = test_client.get("/api/csrf_token").json()["token"]
        test_client.headers["X-CSRF-Token"] = token
        test_client.runtime = runtime  # type: ignore[attr-defined]
        yield test_client


def _until(client: TestClient, check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _poll(client: TestClient, ctx: str, **extra) -> dict:
    return client.post("/api/poll", json={"context": ctx, **extra}).json()


def test_message_creates_a_chat_and_poll_shows_it(client, model_server):
    model_server.tool("response", {"text": "hello back"})
    answer = client.post("/api/message", json={"text": "hi"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["message"], body["status"]) == ("hello back", "completed")
    ctx = body["context"]
    snapshot = _poll(client, ctx, log_from=0)
    assert [c["id"] for c in snapshot["contexts"]] == [ctx]
    types = [item["type"] for item in snapshot["logs"]]
    assert types[0] == "user" and "response" in types
    assert snapshot["logs"][0]["id"] == body["message_id"]
    assert snapshot["context"] == ctx and snapshot["running"] is False
    assert _poll(client, ctx, log_from=snapshot["log_version"])["logs"] == []
    model_server.tool("response", {"text": "more"})
    again = client.post("/api/message", json={"text": "more", "context": ctx})
    assert again.json()["context"] == ctx
    runs = client.runtime.journal.list_runs(context_id=ctx)
    assert [r.status for r in runs] == ["completed", "completed"]


def test_message_async_then_stop(client, model_server):
    model_server.tool("wait", {"seconds": 60})  # the turn runs until stopped
    sent = client.post("/api/message_async", json={"text": "long"}).json()
    ctx = sent["context"]
    assert (sent["kind"], sent["status"]) == ("started", "active")
    assert _poll(client, ctx)["running"] is True
    stopped = client.post("/api/chat_stop", json={"context": ctx}).json()
    assert stopped["stopped"] == 1
    _until(client, lambda: _poll(client, ctx)["running"] is False, "the chat to stop")
    run = client.runtime.journal.get_run(sent["run_id"])
    _until(client, lambda: client.runtime.journal.get_run(run.id).status == "stopped", "stopped")
    again = client.post("/api/chat_stop", json={"context": ctx}).json()
    assert again == {"message": "Nothing was running.", "stopped": 0}


def test_pause_reset_remove_and_unknown_chats(client, model_server):
    _answer_echo(model_server)
    ctx = client.post("/api/chat_create", json={}).json()["ctxid"]
    assert client.post("/api/pause", json={"context": ctx, "paused": True}).json()["pause"]
    assert _poll(client, ctx)["paused"] is True
    assert client.post("/api/pause", json={"context": ctx, "paused": "x"}).status_code == 400
    assert client.post("/api/chat_reset", json={"context": ctx}).status_code == 200
    assert client.post("/api/nudge", json={"ctxid": ctx}).status_code == 200
    _until(client, lambda: _poll(client, ctx)["running"] is False, "the nudged run")
    assert client.post("/api/chat_remove", json={"context": ctx}).status_code == 200
    for name in ("chat_reset", "chat_remove", "pause", "history_get", "chat_stop"):
        response = client.post(f"/api/{name}", json={"context": ctx})
        assert response.status_code == 404, name
        assert response.json()["error"]["code"] == "context_not_found"
    assert _poll(client, ctx)["deselect_chat"] is True
    assert client.post("/api/chat_reset", json={}).json()["error"]["code"] == "bad_request"
    duplicate = client.post("/api/chat_create", json={"new_context": "fixed"})
    assert duplicate.status_code == 200
    again = client.post("/api/chat_create", json={"new_context": "fixed"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "context_exists"


def test_export_then_load_round_trip(client, model_server):
    _answer_echo(model_server)
    ctx = client.post("/api/message", json={"text": "remember me"}).json()["context"]
    exported = client.post("/api/chat_export", json={"ctxid": ctx}).json()
    chat = json.loads(exported["content"])
    assert chat["id"] == ctx
    polled = _poll(client, ctx, log_from=0)["logs"]
    assert [(i["no"], i["content"]) for i in chat["log"]["logs"]] == [
        (i["no"], i["content"]) for i in polled
    ]
    history = client.post("/api/history_get", json={"context": ctx}).json()
    assert "remember me" in history["history"]
    loaded = client.post("/api/chat_load", json={"chats": [exported["content"]]}).json()
    (new_id,) = loaded["ctxids"]
    assert new_id != ctx  # the original id is still in use
    restored = _poll(client, new_id, log_from=0)["logs"]
    assert [i["content"] for i in restored] == [i["content"] for i in chat["log"]["logs"]]
    assert "remember me" in client.post("/api/history_get", json={"context": new_id}).text
    bad = client.post("/api/chat_load", json={"chats": ["{nope"]})
    assert bad.status_code == 400


def test_multipart_message_saves_attachments(client, model_server):
    model_server.tool("response", {"text": "seen"})
    files = {"attachments": ("../../evil name.txt", b"data", "text/plain")}
    response = client.post("/api/message", data={"text": "see file"}, files=files)
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "seen"
    saved = list((client.runtime.usr / "uploads").iterdir())
    assert len(saved) == 1 and saved[0].read_bytes() == b"data"
    assert saved[0].name.endswith("evil_name.txt")
    assert saved[0].name in _prompt_text(model_server.requests[0])


def test_external_api(client, model_server):
    _answer_echo(model_server)
    headers = {"X-API-KEY": "tok"}
    encoded = base64.b64encode(b"abc").decode()
    body = {"message": "hello", "attachments": [{"filename": "a.txt", "base64": encoded}]}
    answer = client.post("/api/api_message", json=body, headers=headers).json()
    assert answer["status"] == "completed" and answer["response"].startswith("echo: ")
    assert answer["input_id"]
    ctx = answer["context_id"]
    log = client.post("/api/api_log_get", json={"context_id": ctx, "length": 1}, headers=headers)
    total = len(_poll(client, ctx, log_from=0)["logs"])
    assert log.json()["log"]["total_items"] == total and log.json()["log"]["returned_items"] == 1
    unknown = client.post(
        "/api/api_message", json={"message": "x", "context_id": "nope"}, headers=headers
    )
    assert unknown.status_code == 404
    bad = {"message": "x", "attachments": [{"filename": "a", "base64": "!!"}]}
    assert client.post("/api/api_message", json=bad, headers=headers).status_code == 400
    wrong = {"message": "x", "lifetime_hours": "soon"}
    assert client.post("/api/api_message", json=wrong, headers=headers).status_code == 400
    reset = client.post("/api/api_reset_chat", json={"context_id": ctx}, headers=headers)
    assert reset.json()["success"] is True
    gone = client.post("/api/api_terminate_chat", json={"context_id": ctx}, headers=headers)
    assert gone.json()["success"] is True
    assert client.runtime.find_context(ctx) is None


def test_a_retried_api_message_with_an_attachment_gets_the_recorded_answer(client, model_server):
    """The retry of a request with an attachment (same input id, same bytes) is the same
    input: the recorded run and answer come back, not ``input_conflict``."""
    _answer_echo(model_server)
    headers = {"X-API-KEY": "tok"}
    encoded = base64.b64encode(b"report body").decode()
    attachment = {"filename": "report.txt", "base64": encoded}
    body = {"message": "read it", "input_id": "retry-1", "attachments": [attachment]}
    first = client.post("/api/api_message", json=body, headers=headers)
    again = client.post("/api/api_message", json=body, headers=headers)
    assert first.status_code == 200 and again.status_code == 200, again.text
    assert again.json()["run_id"] == first.json()["run_id"]
    assert again.json()["response"] == first.json()["response"]
    assert len(model_server.requests) == 1  # the retry called no model
    other = {**body, "attachments": [{"filename": "report.txt", "base64": "b3RoZXI="}]}
    conflict = client.post("/api/api_message", json=other, headers=headers)
    assert conflict.status_code == 409 and conflict.json()["error"]["code"] == "input_conflict"
    saved = list((client.runtime.usr / "uploads").iterdir())
    assert sorted(p.read_bytes() for p in saved) == [b"other", b"report body"]


def test_external_api_chats_expire_after_their_lifetime(client, model_server):
    _answer_echo(model_server)
    headers = {"X-API-KEY": "tok"}
    body = {"message": "short-lived", "lifetime_hours": 1}
    ctx = client.post("/api/api_message", json=body, headers=headers).json()["context_id"]
    kept = client.post("/api/api_message", json={"message": "default"}, headers=headers).json()
    runtime = client.runtime

    def sweep(after: float) -> list[str]:  # on the server's event loop, as its sweeper does
        return client.portal.call(runtime.sweep_expired_api_chats, time.time() + after)

    assert sweep(1800) == []
    assert sweep(3700) == [ctx]
    assert runtime.find_context(ctx) is None
    assert runtime.find_context(kept["context_id"]) is not None  # 24 h by default


def test_a_loaded_chat_holds_no_secret(client, model_server, _private_usr_dir):
    """chat_load is an entry point too: its history and log are masked (issue #17)."""
    secret = "sk-loaded-5e6f7a8b9c"
    _answer_echo(model_server)
    ctx = client.post("/api/message", json={"text": "remember me"}).json()["context"]
    exported = client.post("/api/chat_export", json={"ctxid": ctx}).json()["content"]
    (_private_usr_dir / "secrets.env").write_text(f"LOADED_KEY={secret}\n")
    planted = exported.replace("remember me", f"remember {secret}")
    loaded = client.post("/api/chat_load", json={"chats": [planted]}).json()
    (new_id,) = loaded["ctxids"]
    history = client.post("/api/history_get", json={"context": new_id}).text
    assert secret not in history and "§§secret(LOADED_KEY)" in history
    assert secret not in json.dumps(_poll(client, new_id, log_from=0)["logs"])
