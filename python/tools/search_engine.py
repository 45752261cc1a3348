"""search_engine: web search through a SearXNG instance's JSON API (setting ``searxng_url``).

It only reads: no side effect, so it is on the safe-replay allowlist (durability/replay.py
pins this file's SHA-256). Keep it that way: everything the tool does is in this file, and
any change needs a review of that claim and a new pin.
"""

from __future__ import annotations

from typing import Any

import httpx

from python.helpers.tool import Response, Tool

MAX_RESULTS = 10
TIMEOUT_SECONDS = 20.0
DEFAULT_URL = "http://127.0.0.1:55510"


def search_url(base: str) -> str:
    """The instance's search endpoint: ``<base>/search`` unless the URL already ends there."""
    base = base.strip().rstrip("/") or DEFAULT_URL
    return base if base.endswith("/search") else base + "/search"


def format_results(data: Any, limit: int = MAX_RESULTS) -> str:
    """Upstream's shape: each result as its title, URL and description, a blank line apart."""
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise ValueError("the answer has no 'results' list")
    blocks = []
    for item in results:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        title = str(item.get("title") or "").strip()
        content = str(item.get("content") or "").strip()
        blocks.append("\n".join(part for part in (title, item["url"].strip(), content) if part))
        if len(blocks) >= limit:
            break
    return "\n\n".join(blocks)


class SearchEngine(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        query = str(self.args.get("query") or "").strip()
        if not query:
            return Response("search_engine needs a 'query'.", break_loop=False)
        url = search_url(str(self.agent.config.settings.get("searxng_url") or ""))
        params = {"q": query, "format": "json"}
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client:
                answer = await client.get(
                    url, params=params, headers={"Accept": "application/json"}
                )
        except httpx.HTTPError as exc:
            reason = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
            return Response(
                f"search_engine: the search service at {url} did not answer ({reason}).", False
            )
        if answer.status_code == 403:
            return Response(
                f"search_engine: {url} refused the JSON format (HTTP 403); the SearXNG instance "
                "must list json under search.formats in its settings.yml.",
                False,
            )
        if answer.status_code != 200:
            return Response(f"search_engine: {url} answered HTTP {answer.status_code}.", False)
        try:
            text = format_results(answer.json())
        except ValueError as exc:
            return Response(
                f"search_engine: {url} did not answer with search results ({exc}).", False
            )
        return Response(text or f"No results for '{query}'.", break_loop=False)
