"""system_prompt: the behaviour rules (behaviour_adjustment) first, as upstream puts them;
the one-line default when there are none. The rules are the copy read at the start of the
monologue (monologue_start/_20_behaviour_rules.py) or set by behaviour_adjustment since."""

from __future__ import annotations

from typing import Any

from python.helpers.extension import Extension
from python.helpers.memory import RULES_DATA_KEY


class BehaviourPrompt(Extension):
    async def execute(self, system_prompt: list[str] | None = None, **kwargs: Any) -> None:
        if system_prompt is None:
            return
        rules = self.agent.data.get(RULES_DATA_KEY)
        if isinstance(rules, str) and rules.strip():
            text = self.agent.read_prompt("agent.system.behaviour.md", rules=rules)
        else:
            text = self.agent.read_prompt("agent.system.behaviour_default.md")
        system_prompt.insert(0, text)
