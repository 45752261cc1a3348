"""chat_export writes upstream Agent Zero's chat.json shape and chat_load reads it (#23):
fixtures written from the facts (tests/fixtures/upstream_chats/) load, export in upstream's
shape and load again without losing a message or a log item."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.model_server import model_server as model_server
from tests.unit.test_api_chat_endpoints import client as client

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "upstream_chats"
TOP_KEYS = {"id", "name", "created_at", "type", "last_message", "agents", "streaming_agent"}
TOP_KEYS |= {"log", "data", "output_data"}
LOG_ITEM_KEYS = {"no", "id", "type", "heading", "content", "kvps", "timestamp", "agentno", "temp"}


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def _messages(history: dict[str, Any]) -> list[tuple[bool, Any]]:
    topics = [*history["topics"], history["current"]]
    return [(m["ai"], m["content"]) for t in topics for m in t["messages"]]


def _check_upstream_shape(chat: dict[str, Any]) -> dict[str, Any]:
    """What upstream's loader needs (facts 2.8); returns agent 0's parsed history."""
    assert set(chat) == TOP_KEYS
    assert chat["type"] in ("user", "task")
    assert isinstance(chat["streaming_agent"], int)
    assert set(chat["log"]) == {"guid", "logs", "progress", "progress_no"}
    for item in chat["log"]["logs"]:
        assert set(item) == LOG_ITEM_KEYS and isinstance(item["kvps"], dict)
    for agent in chat["agents"]:
        assert set(agent) == {"number", "data", "history"}
        assert isinstance(agent["history"], str), "upstream keeps history as JSON text"
    history = json.loads(chat["agents"][0]["history"])
    assert history["_cls"] == "History" and {"counter", "bulks", "topics", "current"} <= set(
        history
    )
    for bulk in history["bulks"]:
        assert bulk["_cls"] == "Bulk" and isinstance(bulk["records"], list)
    for topic in [*history["topics"], history["current"]]:
        assert topic["_cls"] == "Topic"
        for message in topic["messages"]:
            assert set(message) == {"_cls", "ai", "content", "summary", "tokens"}
            assert message["_cls"] == "Message"
    return history


def _export(client, ctx: str) -> dict[str, Any]:
    answer = client.post("/api/chat_export", json={"ctxid": ctx})
    assert answer.status_code == 200, answer.text
    assert answer.json()["ctxid"] == ctx
    content = answer.json()["content"]
    assert isinstance(content, str), "content is JSON text, saved by the UI as <ctxid>.json"
    return json.loads(content)


@pytest.mark.parametrize("name", ["chat_v0_9_7.json", "chat_v1_7.json"])
def test_an_upstream_chat_loads_and_exports_in_upstream_shape(client, name):
    original = _fixture(name)
    loaded = client.post("/api/chat_load", json={"chats": [json.dumps(original)]})
    assert loaded.status_code == 200, loaded.text
    (ctx,) = loaded.json()["ctxids"]
    exported = _export(client, ctx)
    history = _check_upstream_shape(exported)
    want = json.loads(original["agents"][0]["history"])
    assert exported["name"] == original["name"]
    assert _messages(history) == _messages(want)
    assert [t["summary"] for t in history["topics"]] == [t["summary"] for t in want["topics"]]
    assert [(b["summary"], len(b["records"])) for b in history["bulks"]] == [
        (b["summary"], len(b["records"])) for b in want["bulks"]
    ]
    wanted_log = [(i["type"], i["heading"], i["content"]) for i in original["log"]["logs"]]
    got_log = [(i["type"], i["heading"], i["content"]) for i in exported["log"]["logs"]]
    assert got_log == wanted_log
    assert [i["no"] for i in exported["log"]["logs"]] == list(range(len(wanted_log)))

    # and our export loads again, to the same story
    again = client.post("/api/chat_load", json={"chats": [json.dumps(exported)]})
    assert again.status_code == 200, again.text
    (ctx2,) = again.json()["ctxids"]
    second = _export(client, ctx2)
    assert _messages(json.loads(second["agents"][0]["history"])) == _messages(want)
    assert [(i["type"], i["content"]) for i in second["log"]["logs"]] == [
        (t, c) for t, _h, c in wanted_log
    ]


def test_a_live_chat_exports_in_upstream_shape(client, model_server):
    model_server.tool("response", {"text": "hello back"})
    ctx = client.post("/api/message", json={"text": "hello there"}).json()["context"]
    exported = _export(client, ctx)
    history = _check_upstream_shape(exported)
    assert exported["id"] == ctx and exported["type"] == "user"
    texts = json.dumps(_messages(history))
    assert "hello there" in texts and "hello back" in texts
    assert any(i["type"] == "response" for i in exported["log"]["logs"])
