"""call_subordinate: delegate a task to a subordinate agent (number n + 1)."""

from __future__ import annotations

from typing import Any

from python.helpers.tool import Response, Tool, truthy


class Delegation(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        from agent import Agent, AgentConfig, UserMessage

        message = str(self.args.get("message", "")).strip()
        if not message:
            return Response("call_subordinate needs a 'message' for the subordinate.", False)
        profile = str(self.args.get("profile", "") or "").strip()
        parent = self.agent
        sub = parent.data.get("_subordinate")
        wanted = profile or None
        if sub is not None and wanted and sub.config.profile != wanted:
            sub = None  # a different specialist was asked for
        if sub is None or truthy(self.args.get("reset", False)):
            config = AgentConfig.from_settings(parent.config.settings, profile=wanted)
            config.workdir = parent.config.workdir
            sub = Agent(parent.number + 1, config, parent.context)
            sub.data["_superior"] = parent
            parent.data["_subordinate"] = sub
        sub.hist_add_user_message(UserMessage(message))
        result = await sub.monologue()
        sub.history.new_topic()
        parent.context.streaming_agent = parent
        if sub.intervention is not None and parent.intervention is None:
            # A message that reached the subordinate after its last check goes up.
            parent.intervention, sub.intervention = sub.intervention, None
        return Response(message=result, break_loop=False)
