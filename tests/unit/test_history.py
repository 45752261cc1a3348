"""History: topics, merging, serialisation and compression (with and without a model)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from python.helpers.history import History, approx_tokens, truncate_text

pytestmark = pytest.mark.unit


def test_consecutive_same_role_messages_are_merged():
    h = History()
    h.add(False, "hello")
    h.add(False, {"system": "note"})
    h.add(True, "reply")
    out = h.output()
    assert [m["role"] for m in out] == ["user", "assistant"]
    assert out[0]["content"] == 'hello\n\n{"system": "note"}'
    assert out[1]["content"] == "reply"


def test_new_topic_keeps_order_and_ids_increase():
    h = History()
    a = h.add(False, "q1")
    h.add(True, "a1")
    h.new_topic()
    b = h.add(False, "q2")
    assert b.id > a.id
    assert len(h.topics) == 1
    assert [m["content"] for m in h.output()] == ["q1", "a1", "q2"]


def test_round_trip_through_json():
    h = History(max_tokens=500)
    h.add(False, "q1")
    h.add(True, {"tool_name": "response", "tool_args": {"text": "x"}})
    h.new_topic()
    h.add(False, "q2")
    h.topics[0].summary = ""
    d = json.loads(json.dumps(h.to_dict()))
    h2 = History.from_dict(d)
    assert h2.output() == h.output()
    assert h2.max_tokens == 500
    assert h2.add(False, "next").id == h.counter + 1


async def test_compress_below_limit_does_nothing():
    h = History(max_tokens=10_000)
    h.add(False, "short")

    async def boom(text: str) -> str:
        raise AssertionError("must not be called")

    assert await h.compress(boom) is False


def _long_history(topics: int, size: int) -> History:
    h = History(max_tokens=400)
    for i in range(topics):
        h.add(False, f"question {i} " + "q" * size)
        h.add(True, f"answer {i} " + "a" * size)
        h.new_topic()
    h.add(False, "current question")
    h.add(True, "working on it")
    return h


async def test_compress_summarises_old_topics_with_the_utility_model():
    h = _long_history(6, 300)
    calls: list[str] = []

    async def summarize(text: str) -> str:
        calls.append(text)
        return f"summary#{len(calls)}"

    assert await h.compress(summarize) is True
    assert calls, "the utility model was not asked"
    assert "question 0" in calls[0]
    assert h.tokens() <= 400 * 0.8
    text = h.output_text()
    assert "current question" in text and "working on it" in text
    assert "summary#" in text


async def test_compress_with_failing_utility_model_truncates():
    h = _long_history(6, 300)

    async def failing(text: str) -> str:
        raise RuntimeError("utility model down")

    assert await h.compress(failing) is True
    assert h.tokens() <= 400 * 0.8
    out = h.output()
    assert out, "history must never become empty"
    assert "current question" in h.output_text()


async def test_compress_truncates_a_single_huge_current_message():
    h = History(max_tokens=200)
    h.add(False, "x" * 20_000)

    async def summarize(text: str) -> str:
        return "s"

    assert await h.compress(summarize)
    assert h.tokens() <= 160
    assert "truncated" in h.output()[0]["content"]


def test_truncate_text_keeps_head_and_tail():
    text = "HEAD" + "m" * 1000 + "TAIL"
    cut = truncate_text(text, 200)
    assert cut.startswith("HEAD") and cut.endswith("TAIL")
    assert len(cut) <= 200
    assert approx_tokens("abcd") == 1


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=12),
    limit=st.integers(min_value=50, max_value=2000),
    fail=st.booleans(),
)
async def test_compress_always_ends_under_target(sizes, limit, fail):
    h = History(max_tokens=limit)
    for i, n in enumerate(sizes):
        h.add(i % 2 == 1, "w" * n)
        if i % 3 == 2:
            h.new_topic()

    async def summarize(text: str) -> str:
        if fail:
            raise RuntimeError("down")
        return "sum:" + text[:40]

    await h.compress(summarize)
    assert h.tokens() <= limit, "compression must end within the limit"
