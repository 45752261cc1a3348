"""input: type text into a terminal session (answer a prompt of a running command)."""

from __future__ import annotations

from typing import Any

from python.helpers.shell import ShellError, Timeouts
from python.helpers.tool import Response, Tool
from python.tools.code_execution_tool import CodeExecution


class Input(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        text = str(self.args.get("keyboard", self.args.get("text", "")))
        try:
            number = int(self.args.get("session", 0) or 0)
        except (TypeError, ValueError):
            return Response("'session' must be a whole number, such as 0.", break_loop=False)
        session = self.agent.context.shells.sessions.get(number)
        if session is None or not session.alive or not session.running:
            return Response(
                f"No command is running in session {number}, so there is nothing to type into. "
                "Run commands with code_execution_tool.",
                break_loop=False,
            )
        try:
            await session.send_input(text)
        except ShellError as e:
            return Response(f"Session {number}: {e}.", break_loop=False)
        timeouts = Timeouts.from_settings(self.agent.config.settings)
        result = await session.read_more(timeouts, self._on_poll)
        return Response(CodeExecution._result_text(result, number), break_loop=False)

    async def _on_poll(self, output: str) -> None:
        self.set_progress(output)
        await self.agent.handle_intervention()
