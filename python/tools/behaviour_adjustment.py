"""behaviour_adjustment: merge new behaviour rules into the memory subdir's rules.

The utility model writes the merged rules (a journaled model call); the new rules commit
with the call's result (``journal_atomic``). They head the agent's system prompt from the
next step on, and every monologue's after that
(python/extensions/system_prompt/_20_behaviour_prompt.py)."""

from __future__ import annotations

from typing import Any

from python.helpers.errors import RepairableException
from python.helpers.memory import RULES_DATA_KEY
from python.helpers.tool import Response
from python.tools._memory import MEMORY_ERRORS, MemoryTool


class BehaviourAdjustment(MemoryTool):
    async def execute(self, adjustments: Any = "", **kwargs: Any) -> Response:
        wanted = adjustments if isinstance(adjustments, str) else str(adjustments or "")
        if not wanted.strip():
            raise RepairableException("'adjustments' must say which behaviour to change.")
        memory = self.memory()
        try:
            current = await memory.rules()
        except MEMORY_ERRORS as exc:
            raise self.failed(exc) from None
        system = self.agent.read_prompt("behaviour.merge.sys.md")
        message = self.agent.read_prompt(
            "behaviour.merge.msg.md", current_rules=current or "(none yet)", adjustments=wanted
        )
        merged = (await self.agent.call_utility_model(system, message)).strip()
        if not merged:
            raise RepairableException("The behaviour rules could not be merged (empty answer).")
        self.journal_writes = memory.rules_writes(merged)
        text = self.agent.read_prompt("behaviour.updated.md")
        # the rules ride in the result, so a reused result shows them too (after_execution)
        return Response(text, False, {RULES_DATA_KEY: self.agent.mask(merged)})

    async def after_execution(self, response: Response, **kwargs: Any) -> None:
        rules = (response.additional or {}).get(RULES_DATA_KEY)
        if isinstance(rules, str):
            self.agent.data[RULES_DATA_KEY] = rules
        await super().after_execution(response, **kwargs)
