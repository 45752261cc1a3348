"""system_prompt: the memory subdir's behaviour rules (behaviour_adjustment) first, as
upstream puts them; the one-line default when there are none or memory is unavailable."""

from __future__ import annotations

import logging
from typing import Any

from python.helpers.extension import Extension
from python.helpers.memory import AgentMemory

logger = logging.getLogger("a0.memory")


class BehaviourPrompt(Extension):
    async def execute(self, system_prompt: list[str] | None = None, **kwargs: Any) -> None:
        if system_prompt is None:
            return
        rules = ""
        if getattr(self.agent.context.session, "journal", None) is not None:
            try:
                rules = await AgentMemory.of(self.agent).rules()
            except Exception as exc:  # a prompt without rules beats no prompt
                logger.warning("behaviour rules unreadable: %s", type(exc).__name__)
        if rules.strip():
            text = self.agent.read_prompt("agent.system.behaviour.md", rules=rules)
        else:
            text = self.agent.read_prompt("agent.system.behaviour_default.md")
        system_prompt.insert(0, text)
