"""response_stream: show the reply being generated as one "agent" log item."""

from __future__ import annotations

from typing import Any

from python.helpers.extensions import Extension
from python.helpers.reply_stream import reply_heading

KEY = "log_item_generating"


def _heading(agent: Any, parsed: dict) -> str:
    return reply_heading(agent.agent_name, parsed, "Generating")


class LogFromStream(Extension):
    async def execute(self, loop_data: Any = None, text: str = "", parsed: Any = None, **kw: Any):
        if loop_data is None or not isinstance(parsed, dict) or not parsed:
            return
        agent = self.agent
        kvps = {k: v for k, v in agent.mask_value(parsed).items() if k != "headline"}
        heading = agent.mask(_heading(agent, parsed))
        item = loop_data.params_temporary.get(KEY)
        if item is None:
            item = agent.context.log.log(
                type="agent", heading=heading, content="", kvps=kvps, agentno=agent.number
            )
            loop_data.params_temporary[KEY] = item
        else:
            item.update(heading=heading, kvps=kvps)
