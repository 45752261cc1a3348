"""monologue_end: store solved problems from the conversation (area solutions;
python/helpers/memory_memorize.py)."""

from __future__ import annotations

from typing import Any

from python.helpers.extension import Extension
from python.helpers.memory_memorize import SOLUTIONS, memorize


class MemorizeSolutions(Extension):
    async def execute(self, **kwargs: Any) -> None:
        await memorize(self.agent, SOLUTIONS)
