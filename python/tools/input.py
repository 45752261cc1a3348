"""input: type text into a terminal session (answer a prompt of a running command).

As upstream, when no command is running in the session the text is run there as a
terminal command. The call is journaled with policy ``adapter:pty``: on a local terminal the
text is handed to the terminal's relay as a file and the relay writes a delivery marker
(sequence number, SHA-256 of the bytes) once the bytes are in the terminal
(durability/adapters/pty.py), so recovery proves "delivered" or "not delivered". Run as a
command, the shell receipt proves it. An SSH session runs the same relay on its host (with
the host's python3): the text is handed over as a file in the remote inbox, the ``.remote``
pointer names that inbox, and recovery reads the marker over SSH. On a host without python3
(a pipe, no relay) only a start marker is written, a crash is held for a person, and the
result says so.
"""

from __future__ import annotations

from typing import Any

from durability import failpoints, paths
from python.helpers import files, shell
from python.helpers.tool import Response, Tool
from python.tools.code_execution_tool import CodeExecution, open_session

#: Failpoints around the handover (durability/failpoints.py ``PTY_POINTS``).
BEFORE_HANDOVER = "pty.before_handover"
AFTER_DELIVERY = "pty.after_delivery"


class Input(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        text = str(self.args.get("keyboard", self.args.get("text", "")))
        try:
            number = int(self.args.get("session", 0) or 0)
        except (TypeError, ValueError):
            return Response("'session' must be a whole number, such as 0.", break_loop=False)
        timeouts = shell.Timeouts.from_settings(self.agent.config.settings)
        session = await open_session(self.agent, number, any_kind=True)
        if isinstance(session, Response):  # the SSH host cannot be used: nothing is typed
            return session
        receipt = self._receipt()
        typed = session.alive and session.running
        try:
            if typed:
                result = await self._type(session, text, timeouts, receipt)
            elif not text.strip():
                return Response(
                    f"No command is running in session {number} and 'keyboard' is empty: "
                    "nothing to do.",
                    break_loop=False,
                )
            else:  # nothing waits for input: the text is a terminal command (upstream)
                result = await session.run(text, timeouts, self._on_poll, receipt=receipt)
        except shell.ReceiptRefused as e:
            return Response(f"Session {number}: {e}; nothing was typed.", break_loop=False)
        except shell.ShellError as e:
            return Response(f"Session {number}: {e}.", break_loop=False)
        self.set_progress("")
        text = CodeExecution._result_text(result, number)
        no_relay = getattr(session, "no_relay", None)
        if no_relay and typed:
            text = f"[Note: {no_relay}.]\n{text}"
        return Response(text, break_loop=False)

    async def _type(
        self,
        session: shell.ShellSession,
        text: str,
        timeouts: shell.Timeouts,
        receipt: shell.Receipt | None,
    ) -> shell.CommandResult:
        """Hand the text to the terminal (delivery receipt), or to an SSH session's pipe
        after a start-only marker (a crash there is held: nothing proves delivery)."""
        identity = None if receipt is None else (receipt[1], receipt[2])
        if receipt is not None and session.relay is None:
            receipts, call_id, args_digest = receipt
            try:
                receipts.mark_started(call_id, args_digest)
            except shell.ReceiptError as e:
                raise shell.ReceiptRefused(
                    f"no receipt can be written for this call ({e.code})"
                ) from e
        elif receipt is not None:
            await session.record_input(receipt)  # an SSH host's inbox, before the handover
        state = paths.state_dir(files.usr_dir())
        failpoints.failpoint(BEFORE_HANDOVER, self.name, state)
        await session.send_input(text, identity)
        failpoints.failpoint(AFTER_DELIVERY, self.name, state)
        return await session.read_more(timeouts, self._on_poll)

    def _receipt(self) -> shell.Receipt | None:
        """The receipt context when the loop journals this call and receipts are enabled."""
        receipts = getattr(self.agent.context.session, "receipts", None)
        identity = self.call_identity
        if receipts is None or identity is None:
            return None
        return (receipts, identity[0], identity[1])

    async def _on_poll(self, output: str) -> None:
        self.set_progress(output)
        await self.agent.handle_intervention()
