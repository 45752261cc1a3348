"""system_prompt: the main manual (role, environment, communication, solving, tips)."""

from __future__ import annotations

from typing import Any

from python.helpers.extensions import Extension


class MainPrompt(Extension):
    async def execute(self, system_prompt: list[str] | None = None, **kwargs: Any) -> None:
        if system_prompt is not None:
            system_prompt.append(self.agent.read_prompt("agent.system.main.md"))
