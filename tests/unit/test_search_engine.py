"""search_engine against a local server speaking SearXNG's JSON API, through real turns."""

from __future__ import annotations

import asyncio
import socket

import pytest

from agent import UserMessage
from python.tools.search_engine import format_results, search_url
from tests.support.model_server import model_server as model_server
from tests.support.searxng_server import SearxngServer
from tests.unit.test_agent_loop import TIMEOUT, _prompt_text, make_context, workdir

pytestmark = pytest.mark.unit

__all__ = ["make_context", "model_server", "workdir"]

RESULTS = [
    {"title": "Durable execution", "url": "https://example.org/durable", "content": "Journals."},
    {"title": "No URL", "content": "skipped"},
    {"title": "Agent Zero", "url": "https://example.org/a0", "content": ""},
]


async def _run(ctx, text: str) -> str:
    return await asyncio.wait_for(ctx.communicate(UserMessage(text)), TIMEOUT)


def test_search_url_and_result_shape():
    assert search_url("http://h:1") == "http://h:1/search"
    assert search_url("http://h:1/search/") == "http://h:1/search"
    assert search_url("") == "http://127.0.0.1:55510/search"
    text = format_results({"results": RESULTS})
    assert text == (
        "Durable execution\nhttps://example.org/durable\nJournals.\n\n"
        "Agent Zero\nhttps://example.org/a0"
    )
    assert format_results({"results": RESULTS * 10}, limit=3).count("https://") == 3
    with pytest.raises(ValueError):
        format_results(["not", "an", "object"])


async def test_search_turn_returns_titles_urls_and_descriptions(model_server, make_context):
    with SearxngServer() as searx:
        searx.results["durable agents"] = RESULTS
        model_server.tool("search_engine", {"query": "durable agents"})
        model_server.tool("search_engine", {"query": "nothing here"})
        model_server.tool("search_engine", {"query": ""})
        model_server.tool("response", {"text": "found"})
        ctx = make_context(searxng_url=searx.url)
        assert await _run(ctx, "search") == "found"
        assert searx.queries == ["durable agents", "nothing here"]
    first = _prompt_text(model_server.requests[1])
    assert "Durable execution\nhttps://example.org/durable\nJournals." in first
    assert "No results for 'nothing here'" in _prompt_text(model_server.requests[2])
    assert "needs a 'query'" in _prompt_text(model_server.requests[3])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("forbidden", "search.formats"), ("garbage", "did not answer with search results")],
)
async def test_a_misconfigured_or_broken_instance_is_a_clear_tool_result(
    model_server, make_context, mode, expected
):
    with SearxngServer() as searx:
        searx.mode = mode
        model_server.tool("search_engine", {"query": "q"})
        model_server.tool("response", {"text": "coped"})
        ctx = make_context(searxng_url=searx.url)
        assert await _run(ctx, "search") == "coped"
    assert expected in _prompt_text(model_server.requests[1])


async def test_an_unreachable_instance_is_a_clear_tool_result(model_server, make_context):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once the socket is closed
    model_server.tool("search_engine", {"query": "q"})
    model_server.tool("response", {"text": "coped"})
    ctx = make_context(searxng_url=f"http://127.0.0.1:{port}")
    assert await _run(ctx, "search") == "coped"
    assert "did not answer" in _prompt_text(model_server.requests[1])


async def test_search_engine_is_on_the_safe_replay_allowlist(make_context, chats):
    ctx = make_context()
    tool = ctx.agent0.get_tool("search_engine", None, {"query": "x"}, "")
    assert await chats.policy.of(tool) == "safe_replay"
