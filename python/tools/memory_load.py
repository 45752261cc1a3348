"""memory_load: search the agent's memory (``query``, ``threshold`` 0.7, ``limit`` 10,
``filter`` over the metadata). A read: it writes nothing."""

from __future__ import annotations

import json
from typing import Any

from python.helpers.memory import format_hits
from python.helpers.tool import Response
from python.tools._memory import MEMORY_ERRORS, MemoryTool, number, whole


class MemoryLoad(MemoryTool):
    async def execute(
        self,
        query: Any = "",
        threshold: Any = None,
        limit: Any = None,
        filter: Any = "",
        **kwargs: Any,
    ) -> Response:
        memory = self.memory()
        try:
            hits = await memory.search(
                str(query or ""),
                threshold=number(threshold, 0.7, "threshold"),
                limit=whole(limit, 10, "limit"),
                filter=str(filter or "") or None,
            )
        except MEMORY_ERRORS as exc:
            raise self.failed(exc) from None
        if not hits:
            text = self.agent.read_prompt("fw.memories_not_found.md", query=str(query))
            return Response(json.dumps({"memory": text.strip()}, ensure_ascii=False), False)
        return Response(format_hits(hits), False)
