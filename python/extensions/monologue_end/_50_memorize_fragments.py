"""monologue_end: store facts from the conversation (area fragments;
python/helpers/memory_memorize.py)."""

from __future__ import annotations

from typing import Any

from python.helpers.extension import Extension
from python.helpers.memory_memorize import FRAGMENTS, memorize


class MemorizeFragments(Extension):
    async def execute(self, **kwargs: Any) -> None:
        await memorize(self.agent, FRAGMENTS)
