"""memory_forget: delete every memory a search finds (``query``, ``threshold`` 0.7,
``filter``). The search and the delete run in one transaction with the call's result
(``journal_atomic``): what is forgotten is what that transaction found."""

from __future__ import annotations

import json
from typing import Any

from python.helpers.tool import Response
from python.tools._memory import MEMORY_ERRORS, MemoryTool, number

_COUNT_LIMIT = 1_000_000


class MemoryForget(MemoryTool):
    async def execute(
        self, query: Any = "", threshold: Any = None, filter: Any = "", **kwargs: Any
    ) -> Response:
        memory = self.memory()
        text, cut = str(query or ""), number(threshold, 0.7, "threshold")
        where = str(filter or "") or None
        try:
            found = await memory.search(text, threshold=cut, limit=_COUNT_LIMIT, filter=where)
            write = await memory.forget_write(text, threshold=cut, filter=where)
        except MEMORY_ERRORS as exc:
            raise self.failed(exc) from None
        self.journal_writes = [write]
        return Response(json.dumps({"memories_deleted": str(len(found))}), False)
