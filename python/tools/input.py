"""input: type text into a terminal session (answer a prompt of a running command).

As upstream, when no command is running in the session the text is run there as a
terminal command. The call is journaled with policy ``hold`` (no receipt proves typed
text), so a crash while it runs is held for a person.
"""

from __future__ import annotations

from typing import Any

from python.helpers.shell import ShellError, Timeouts
from python.helpers.tool import Response, Tool
from python.tools.code_execution_tool import CodeExecution, open_session


class Input(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        text = str(self.args.get("keyboard", self.args.get("text", "")))
        try:
            number = int(self.args.get("session", 0) or 0)
        except (TypeError, ValueError):
            return Response("'session' must be a whole number, such as 0.", break_loop=False)
        timeouts = Timeouts.from_settings(self.agent.config.settings)
        session = await open_session(self.agent, number, any_kind=True)
        if isinstance(session, Response):  # the SSH host cannot be used: nothing is typed
            return session
        try:
            if session.alive and session.running:
                await session.send_input(text)
                result = await session.read_more(timeouts, self._on_poll)
            elif not text.strip():
                return Response(
                    f"No command is running in session {number} and 'keyboard' is empty: "
                    "nothing to do.",
                    break_loop=False,
                )
            else:  # nothing waits for input: the text is a terminal command (upstream)
                result = await session.run(text, timeouts, self._on_poll)
        except ShellError as e:
            return Response(f"Session {number}: {e}.", break_loop=False)
        self.set_progress("")
        return Response(CodeExecution._result_text(result, number), break_loop=False)

    async def _on_poll(self, output: str) -> None:
        self.set_progress(output)
        await self.agent.handle_intervention()
