"""reasoning_stream: show the model's reasoning in the iteration's "agent" log item."""

from __future__ import annotations

from typing import Any

from python.helpers.extensions import Extension

KEY = "log_item_generating"


class LogReasoning(Extension):
    async def execute(self, loop_data: Any = None, text: str = "", **kwargs: Any) -> None:
        if loop_data is None or not text:
            return
        agent = self.agent
        item = loop_data.params_temporary.get(KEY)
        if item is None:
            item = agent.context.log.log(
                type="agent",
                heading=f"{agent.agent_name}: Reasoning",
                content="",
                agentno=agent.number,
            )
            loop_data.params_temporary[KEY] = item
        item.update(content=agent.mask(text))
