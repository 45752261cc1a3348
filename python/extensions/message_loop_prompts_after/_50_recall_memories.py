"""message_loop_prompts_after: recall memories and solutions into the prompt's extras
(python/helpers/memory_recall.py; upstream's _50_recall_memories and _91_recall_wait in
one, since the search is awaited here)."""

from __future__ import annotations

from typing import Any

from python.helpers.extension import Extension
from python.helpers.memory_recall import recall


class RecallMemories(Extension):
    async def execute(self, loop_data: Any = None, **kwargs: Any) -> None:
        await recall(self.agent, loop_data if loop_data is not None else self.agent.loop_data)
