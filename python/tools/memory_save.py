"""memory_save: store a text in the agent's memory (area ``main`` unless named).

Upstream's shape: ``text``, ``area`` and any further argument kept as the memory's metadata.
The write commits with the call's result (``journal_atomic``): saved exactly once."""

from __future__ import annotations

from typing import Any

from python.helpers.tool import Response
from python.tools._memory import MEMORY_ERRORS, MemoryTool


class MemorySave(MemoryTool):
    async def execute(self, text: Any = "", area: Any = "", **kwargs: Any) -> Response:
        memory = self.memory()
        extra = {k: v for k, v in self.args.items() if k not in ("text", "area")}
        try:
            memory_id, write = await memory.save_write(
                text if isinstance(text, str) else str(text or ""), str(area or ""), extra
            )
        except MEMORY_ERRORS as exc:
            raise self.failed(exc) from None
        self.journal_writes = [write]
        return Response(self.agent.read_prompt("fw.memory_saved.md", memory_id=memory_id), False)
