"""unknown: what the model gets when it names a tool that does not exist."""

from __future__ import annotations

from typing import Any

from python.helpers import prompts
from python.helpers.tool import Response, Tool


class Unknown(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        tools = ", ".join(self.agent.available_tools())
        text = self.agent.read_prompt(
            "fw.tool_not_found.md",
            tool_name=self.name,
            tools=tools,
            tools_prompt=prompts.tools_prompt(self.agent),
        )
        return Response(message=text, break_loop=False)
