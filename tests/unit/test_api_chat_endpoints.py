"""Chat endpoints against a stand-in loop module (the real loop is covered by system tests)."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from python.durable.runtime import Runtime
from python.helpers.api import discover_handlers
from python.helpers.auth import AuthConfig
from python.helpers.history import History
from run_ui import build_app

pytestmark = pytest.mark.unit


class FakeLog:
    def __init__(self) -> None:
        self.guid = f"guid-{id(self)}"
        self.items: list[dict[str, Any]] = []
        self.version = 0

    def log(self, type: str, heading: str = "", content: str = "", kvps=None, agentno=0, id=None):
        item = {"no": len(self.items), "type": type, "heading": heading, "content": content}
        item.update({"kvps": kvps, "agentno": agentno, "id": id})
        self.items.append(item)
        self.version += 1
        return item

    def output(self, start: int = 0) -> list[dict[str, Any]]:
        return self.items[start:]


class FakeAgent:
    def __init__(self) -> None:
        self.history = History()
        self.data: dict[str, Any] = {}
        self.number = 0


class FakeContext:
    _contexts: dict[str, FakeContext] = {}
    gate: asyncio.Event | None = None

    def __init__(self, config, id=None, name=None, type="user") -> None:
        self.id = id or f"c{len(FakeContext._contexts) + 1}"
        self.name, self.type, self.config = name, type, config
        self.log, self.paused, self.task = FakeLog(), False, None
        self.agent0 = FakeAgent()
        self.created_at = f"2026-01-01T00:00:{len(FakeContext._contexts):02d}"
        FakeContext._contexts[self.id] = self

    @classmethod
    def get(cls, id):
        return cls._contexts.get(id)

    @classmethod
    def all(cls):
        return list(cls._contexts.values())

    @classmethod
    def remove(cls, id):
        return cls._contexts.pop(id, None)

    def is_running(self) -> bool:
        return self.task is not None and not self.task.done()

    def communicate(self, msg) -> asyncio.Task:
        async def run() -> str:
            if FakeContext.gate is not None:
                await FakeContext.gate.wait()
            self.agent0.history.add(False, msg.message)
            self.log.log("response", content=f"echo: {msg.message}")
            return f"echo: {msg.message} {len(msg.attachments)}"

        self.task = asyncio.get_running_loop().create_task(run())
        return self.task

    def nudge(self):
        return None

    def kill_process(self) -> None:
        if self.task is not None:
            self.task.cancel()

    def reset(self) -> None:
        self.kill_process()
        self.log = FakeLog()

    def output(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "created_at": self.created_at}


@pytest.fixture
def fake_loop(monkeypatch):
    module = types.ModuleType("agent")

    class UserMessage:
        def __init__(self, message, attachments=None, system_message=None, id=None):
            self.message, self.attachments, self.id = message, attachments or [], id

    class AgentConfig:
        @classmethod
        def from_settings(cls, settings):
            return cls()

    module.AgentContext = FakeContext
    module.AgentConfig = AgentConfig
    module.UserMessage = UserMessage
    module.AgentContextType = types.SimpleNamespace(BACKGROUND="background")
    monkeypatch.setitem(sys.modules, "agent", module)
    FakeContext._contexts = {}
    FakeContext.gate = None
    yield module
    FakeContext._contexts = {}


@pytest.fixture
def client(fake_loop, tmp_path: Path):
    runtime = Runtime(tmp_path, {"mcp_server_token": "tok"}, AuthConfig())
    with TestClient(build_app(runtime, discover_handlers(), secret_key="k")) as test_client:
        token = test_client.get("/api/csrf_token").json()["token"]
        test_client.headers["X-CSRF-Token"] = token
        test_client.runtime = runtime
        yield test_client


def test_message_creates_a_chat_and_poll_shows_it(client):
    answer = client.post("/api/message", json={"text": "hi"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["message"] == "echo: hi 0"
    ctx = body["context"]
    snapshot = client.post("/api/poll", json={"context": ctx, "log_from": 0}).json()
    assert [c["id"] for c in snapshot["contexts"]] == [ctx]
    assert [item["type"] for item in snapshot["logs"]] == ["user", "response"]
    assert snapshot["logs"][0]["id"] == body["message_id"]
    assert snapshot["context"] == ctx and snapshot["running"] is False
    later = client.post("/api/poll", json={"context": ctx, "log_from": snapshot["log_version"]})
    assert later.json()["logs"] == []
    again = client.post("/api/message", json={"text": "more", "context": ctx})
    assert again.json()["context"] == ctx


def test_message_async_then_stop(client):
    gate = FakeContext.gate = asyncio.Event()  # never set: the turn runs until stopped
    sent = client.post("/api/message_async", json={"text": "long"}).json()
    ctx = sent["context"]
    assert client.post("/api/poll", json={"context": ctx}).json()["running"] is True
    stopped = client.post("/api/chat_stop", json={"context": ctx}).json()
    assert stopped["stopped"] == 1
    assert client.post("/api/poll", json={"context": ctx}).json()["running"] is False
    assert not gate.is_set()


def test_pause_reset_remove_and_unknown_chats(client):
    ctx = client.post("/api/chat_create", json={}).json()["ctxid"]
    assert client.post("/api/pause", json={"context": ctx, "paused": True}).json()["pause"]
    assert client.post("/api/poll", json={"context": ctx}).json()["paused"] is True
    assert client.post("/api/pause", json={"context": ctx, "paused": "x"}).status_code == 400
    assert client.post("/api/chat_reset", json={"context": ctx}).status_code == 200
    assert client.post("/api/nudge", json={"ctxid": ctx}).status_code == 200
    assert client.post("/api/chat_remove", json={"context": ctx}).status_code == 200
    for name in ("chat_reset", "chat_remove", "pause", "history_get", "chat_stop"):
        response = client.post(f"/api/{name}", json={"context": ctx})
        assert response.status_code == 404, name
        assert response.json()["error"]["code"] == "context_not_found"
    assert client.post("/api/poll", json={"context": ctx}).json()["deselect_chat"] is True
    assert client.post("/api/chat_reset", json={}).json()["error"]["code"] == "bad_request"
    duplicate = client.post("/api/chat_create", json={"new_context": "fixed"})
    assert duplicate.status_code == 200
    again = client.post("/api/chat_create", json={"new_context": "fixed"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "context_exists"


def test_export_then_load_round_trip(client):
    ctx = client.post("/api/message", json={"text": "remember me"}).json()["context"]
    exported = client.post("/api/chat_export", json={"ctxid": ctx}).json()
    chat = json.loads(exported["content"])
    assert chat["id"] == ctx and len(chat["log"]["items"]) == 2
    history = client.post("/api/history_get", json={"context": ctx}).json()
    assert "remember me" in history["history"]
    loaded = client.post("/api/chat_load", json={"chats": [exported["content"]]}).json()
    (new_id,) = loaded["ctxids"]
    assert new_id != ctx  # the original id is still in use
    restored = client.post("/api/poll", json={"context": new_id}).json()["logs"]
    assert [i["content"] for i in restored] == [i["content"] for i in chat["log"]["items"]]
    assert "remember me" in client.post("/api/history_get", json={"context": new_id}).text
    bad = client.post("/api/chat_load", json={"chats": ["{nope"]})
    assert bad.status_code == 400


def test_multipart_message_saves_attachments(client):
    files = {"attachments": ("../../evil name.txt", b"data", "text/plain")}
    response = client.post("/api/message", data={"text": "see file"}, files=files)
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "echo: see file 1"
    saved = list((client.runtime.usr / "uploads").iterdir())
    assert len(saved) == 1 and saved[0].read_bytes() == b"data"
    assert saved[0].name.endswith("evil_name.txt")


def test_external_api(client, tmp_path):
    headers = {"X-API-KEY": "tok"}
    encoded = base64.b64encode(b"abc").decode()
    body = {"message": "hello", "attachments": [{"filename": "a.txt", "base64": encoded}]}
    answer = client.post("/api/api_message", json=body, headers=headers).json()
    assert answer["response"] == "echo: hello 1"
    assert answer["input_id"]
    ctx = answer["context_id"]
    log = client.post("/api/api_log_get", json={"context_id": ctx, "length": 1}, headers=headers)
    assert log.json()["log"]["total_items"] == 2 and log.json()["log"]["returned_items"] == 1
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
    assert FakeContext.get(ctx) is None


def test_external_api_chats_expire_after_their_lifetime(client):
    import time

    headers = {"X-API-KEY": "tok"}
    body = {"message": "short-lived", "lifetime_hours": 1}
    ctx = client.post("/api/api_message", json=body, headers=headers).json()["context_id"]
    kept = client.post("/api/api_message", json={"message": "default"}, headers=headers).json()
    runtime = client.runtime
    assert runtime.sweep_expired_api_chats(now=time.time() + 1800) == []
    assert runtime.sweep_expired_api_chats(now=time.time() + 3700) == [ctx]
    assert FakeContext.get(ctx) is None
    assert FakeContext.get(kept["context_id"]) is not None  # 24 h by default
