"""memory_delete: delete memories by id (``ids``: comma-separated; unknown ids are
ignored). The delete commits with the call's result (``journal_atomic``)."""

from __future__ import annotations

import json
from typing import Any

from python.helpers.memory import RULES_MODEL
from python.helpers.tool import Response
from python.tools._memory import MEMORY_ERRORS, MemoryTool


def parse_ids(ids: Any) -> list[str]:
    items = ids if isinstance(ids, list) else str(ids or "").split(",")
    return list(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))


class MemoryDelete(MemoryTool):
    async def execute(self, ids: Any = "", **kwargs: Any) -> Response:
        memory = self.memory()
        wanted = parse_ids(ids)
        try:
            found = await memory.memories.run_async(_existing, memory, wanted)
        except MEMORY_ERRORS as exc:
            raise self.failed(exc) from None
        self.journal_writes = [memory.delete_write(found)] if found else []
        return Response(json.dumps({"memories_deleted": str(len(found))}), False)


def _existing(memory: Any, ids: list[str]) -> list[str]:
    """The ids among ``ids`` that name a memory of the subdir now."""
    if not ids:
        return []
    memories = memory.memories
    memories.journal.store.flush()
    rows = memories.journal.store.read(lambda tx: tx.memories.get(memory.subdir, ids))
    return [row.id for row in rows if row.model != RULES_MODEL]
