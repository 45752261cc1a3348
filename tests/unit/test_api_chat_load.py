"""chat_load checks every chat before it makes any (issue #17, point 6).

Over the HTTP app with the real journal: a request whose chats are not all valid is a
``400 bad_request`` naming the bad chat's index and makes nothing (no chat, no run); no
shape of the chats list is ever a 5xx (Hypothesis); a valid request makes every chat, each
journaled.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.model_server import model_server as model_server
from tests.unit.test_api_chat_endpoints import client as client

pytestmark = pytest.mark.unit

GOOD = {
    "id": "loaded-good",
    "name": "good one",
    "agents": [
        {"number": 0, "history": {"current": {"messages": [{"ai": False, "content": "hi"}]}}}
    ],
    "log": {"items": [{"type": "user", "heading": "User message", "content": "hi"}]},
}


def _made(client) -> tuple[int, int]:
    """(chats loaded in the server, runs in the journal)."""
    runtime = client.runtime
    return len(runtime.chats.contexts()), len(runtime.journal.list_runs(limit=1_000_000))


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({**GOOD, "log": {"items": [{"type": "Not A Type"}]}}, "log.items[0].type"),
        ({**GOOD, "agents": [{"history": "{not json"}]}, "agents[0].history"),
        ({**GOOD, "agents": [{"history": {"topics": [{"messages": [{"content": 1}]}]}}]}, None),
        ({**GOOD, "agents": [{"history": json.dumps({"current": {"messages": "x"}})}]}, None),
        ({**GOOD, "log": {"items": [{"kvps": ["a"]}]}}, "log.items[0].kvps"),
        ({**GOOD, "name": {"a": 1}}, "name"),
        ("[1, 2]", ""),
    ],
)
def test_one_bad_chat_refuses_the_request_and_makes_nothing(client, bad, field):
    before = _made(client)
    answer = client.post("/api/chat_load", json={"chats": [GOOD, bad]})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "bad_request" and error["index"] == 1, error
    assert "chat 1" in error["message"]
    if field is not None:
        assert error["field"] == field, error
    assert _made(client) == before  # the good chat was not made either
    assert client.runtime.find_context("loaded-good") is None


def test_valid_chats_are_made_and_journaled(client):
    second = {**GOOD, "id": "loaded-good", "log": {"logs": [{"content": "upstream's key"}]}}
    second["agents"] = [{"history": json.dumps({"_cls": "History", "bulks": [], "topics": []})}]
    answer = client.post("/api/chat_load", json={"chats": [GOOD, json.dumps(second)]})
    assert answer.status_code == 200, answer.text
    first_id, second_id = answer.json()["ctxids"]
    assert first_id == "loaded-good" and second_id != first_id  # an id in use gets a new one
    runs = client.runtime.journal.list_runs(limit=100)
    assert sorted((r.context_id, r.status, r.reason) for r in runs) == sorted(
        [(first_id, "completed", "chat_loaded"), (second_id, "completed", "chat_loaded")]
    )
    logs = client.post("/api/poll", json={"context": second_id, "log_from": 0}).json()["logs"]
    assert [(i["type"], i["content"]) for i in logs] == [("info", "upstream's key")]


# ---- any shape: never a 5xx, never half a request ----------------------------------------
KEYS = [
    *("id", "name", "log", "items", "logs", "agents", "history", "number", "type"),
    *("heading", "content", "kvps", "agentno", "ai", "messages", "topics", "bulks"),
    *("current", "summary", "counter", "records", "_cls"),
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["user", "agent", "info", "Not A Type", "{", "[]", "{}", "\x00"]),
)


def _json_values() -> st.SearchStrategy[Any]:
    return st.recursive(
        SCALARS,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.sampled_from(KEYS), inner, max_size=6),
            inner.map(json.dumps),  # JSON text, as upstream keeps a history
        ),
        max_leaves=30,
    )


CHATS = st.lists(st.one_of(_json_values(), st.just(GOOD), st.just(json.dumps(GOOD))), max_size=4)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(chats=st.one_of(CHATS, _json_values()))
def test_any_chats_list_is_a_4xx_with_nothing_made_or_all_made(client, chats):
    before_chats, before_runs = _made(client)
    answer = client.post("/api/chat_load", json={"chats": chats})
    assert answer.status_code < 500, answer.text
    made_chats, made_runs = _made(client)
    if answer.status_code == 200:
        made = answer.json()["ctxids"]
        assert len(made) == len(set(made)) == len(chats)
        assert (made_chats, made_runs) == (before_chats + len(chats), before_runs + len(chats))
    else:
        assert answer.json()["error"]["code"] == "bad_request", answer.text
        assert (made_chats, made_runs) == (before_chats, before_runs)
