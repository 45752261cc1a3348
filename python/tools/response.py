"""response: the final answer; ends the monologue."""

from __future__ import annotations

from typing import Any

from python.helpers.tool import Response, Tool


class ResponseTool(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        text = self.args.get("text", self.args.get("message", ""))
        return Response(message=str(text), break_loop=True)

    async def before_execution(self, **kwargs: Any) -> None:
        pass  # the answer is logged as a "response" item instead of a tool item

    async def after_execution(self, response: Response, **kwargs: Any) -> None:
        # The model's JSON is already in history: no tool result is added.
        self.agent.context.log.log(
            type="response",
            heading=f"{self.agent.agent_name}: Responding",
            content=self.agent.mask(response.message),
            agentno=self.agent.number,
        ).mark(**(self.log_marks or {}))
