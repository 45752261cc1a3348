"""Chats made without a message survive a restart (issue #17, point 7), on real run_ui.py
processes: a chat made by ``chat_create`` and one loaded by ``chat_load`` come back, after a
clean stop and after a SIGKILL, with their name, log and history as they were made, and the
loaded chat goes on from its history."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.integration._durable_system import crashable
from tests.integration._helpers import request_text, wait_until

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

HISTORY = {
    "_cls": "History",
    "counter": 2,
    "bulks": [],
    "topics": [],
    "current": {
        "summary": "",
        "messages": [
            {"ai": False, "content": "the loaded question"},
            {"ai": True, "content": "the loaded answer"},
        ],
    },
}
CHAT = {
    "id": "imported-1",
    "name": "imported chat",
    "agents": [{"number": 0, "history": json.dumps(HISTORY)}],
    "log": {
        "items": [
            {"type": "user", "heading": "User message", "content": "the loaded question"},
            {"type": "response", "heading": "A0: Responding", "content": "the loaded answer"},
        ]
    },
}


def _snapshot(client: httpx.Client, context_id: str) -> dict[str, Any]:
    """What a person sees of the chat: its name in the list, its log and its history."""
    poll = client.post("/api/poll", json={"context": context_id, "log_from": 0})
    assert poll.status_code == 200, poll.text
    body = poll.json()
    names = {c["id"]: c["name"] for c in body["contexts"]}
    logs = [(i["type"], i["heading"], i["content"], i["kvps"]) for i in body["logs"]]
    history = client.post("/api/history_get", json={"context": context_id})
    assert history.status_code == 200, history.text
    return {"name": names.get(context_id), "logs": logs, "history": history.json()["history"]}


def _listed(client: httpx.Client) -> set[str]:
    return {c["id"] for c in client.post("/api/poll", json={}).json()["contexts"]}


@pytest.mark.parametrize("restart", ["clean stop", "SIGKILL"])
def test_created_and_loaded_chats_survive_a_restart(crashable, model_server, restart):
    server = crashable.start()
    with server.ui_client() as client:
        made = client.post("/api/chat_create", json={"name": "empty chat"})
        assert made.status_code == 200, made.text
        created = made.json()["ctxid"]
        answer = client.post("/api/chat_load", json={"chats": [json.dumps(CHAT)]})
        assert answer.status_code == 200, answer.text
        (loaded,) = answer.json()["ctxids"]
        assert loaded == "imported-1"
        before = {cid: _snapshot(client, cid) for cid in (created, loaded)}
    assert before[created] == {"name": "empty chat", "logs": [], "history": ""}
    assert "the loaded question" in before[loaded]["history"]
    assert [item[2] for item in before[loaded]["logs"]] == [
        "the loaded question",
        "the loaded answer",
    ]

    if restart == "SIGKILL":
        crashable.kill()  # no message was sent: nothing but the two requests wrote
    else:
        crashable.stop()
    server = crashable.start()
    with server.ui_client() as client:
        wait_until(lambda: {created, loaded} <= _listed(client), what="both chats listed")
        after = {cid: _snapshot(client, cid) for cid in (created, loaded)}
    assert after == before

    model_server.tool("response", {"text": "went on"})
    reply = server.api_message("and now?", context_id=loaded)
    assert reply.status_code == 200, reply.text
    assert reply.json()["response"] == "went on"
    seen = request_text(model_server.requests[-1])
    assert "the loaded question" in seen and "the loaded answer" in seen
    crashable.stop()
