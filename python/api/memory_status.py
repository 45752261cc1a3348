"""GET|POST /api/memory_status: how memory search runs here (sqlite-vec, pgvector, exact),
the embedding model, and the progress of knowledge import and re-embedding."""

from __future__ import annotations

from typing import Any

from python.server.api import ApiHandler


class MemoryStatus(ApiHandler):
    accepts_api_key = True
    methods = ("GET", "POST")

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        return self.runtime.memory.status()
