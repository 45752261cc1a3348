"""code_execution_tool: run terminal commands, Python or Node.js in persistent sessions."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from python.helpers import files
from python.helpers.history import truncate_text
from python.helpers.shell import (
    CommandResult,
    Receipt,
    ReceiptError,
    ReceiptRefused,
    ShellError,
    ShellSession,
    Timeouts,
)
from python.helpers.tool import Response, Tool, truthy

RUNTIMES = ("terminal", "python", "nodejs", "output", "reset")
MAX_OUTPUT_CHARS = 20_000


class CodeExecution(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        runtime = str(self.args.get("runtime", "terminal")).strip().lower()
        code = str(self.args.get("code", ""))
        try:
            number = int(self.args.get("session", 0) or 0)
        except (TypeError, ValueError):
            return Response("'session' must be a whole number, such as 0.", break_loop=False)
        if runtime not in RUNTIMES:
            allowed = ", ".join(RUNTIMES)
            return Response(f"Unknown runtime '{runtime}'. Use one of: {allowed}.", False)
        shells = self.agent.context.shells
        # upstream: "reset": true kills what runs in the session before this call's code
        if runtime == "reset" or (truthy(self.args.get("reset")) and not code.strip()):
            await shells.reset(number)
            return Response(f"Session {number} was reset.", break_loop=False)
        if truthy(self.args.get("reset")) and runtime != "output":
            await shells.reset(number)
        session_or_refusal = await open_session(self.agent, number)
        if isinstance(session_or_refusal, Response):
            return session_or_refusal
        session = session_or_refusal
        notice = first_use_notice(session)
        timeouts = Timeouts.from_settings(self.agent.config.settings)
        try:
            if runtime == "output":
                result = await session.read_more(timeouts, self._on_poll)
            elif not code.strip():
                return Response("'code' is empty: nothing to run.", break_loop=False)
            elif session.running and truthy(self.args.get("allow_running")):
                result = await self._type_into_running(session, code, timeouts)
            else:
                result = await session.run(
                    await self._command(session, runtime, code),
                    timeouts,
                    self._on_poll,
                    receipt=self._receipt(),
                )
        except ReceiptRefused as e:
            return Response(f"Session {number}: {e}; nothing was run.", break_loop=False)
        except ShellError as e:
            return Response(self._busy_text(number, str(e)), break_loop=False)
        self.set_progress("")
        return Response(notice + self._result_text(result, number), break_loop=False)

    async def _type_into_running(
        self, session: ShellSession, text: str, timeouts: Timeouts
    ) -> CommandResult:
        """``allow_running``: the text goes to the program that is still running (as the
        input tool does). No shell wraps it, so a journaled call leaves a start-only receipt:
        after a crash it is held (outcome unknown), never typed again blindly."""
        receipt = self._receipt()
        if receipt is not None:
            receipts, call_id, args_digest = receipt
            try:
                receipts.mark_started(call_id, args_digest)
            except ReceiptError as e:
                raise ReceiptRefused(f"no receipt can be written for this call ({e.code})") from e
        await session.send_input(text)
        return await session.read_more(timeouts, self._on_poll)

    def _receipt(self) -> Receipt | None:
        """The receipt context when the loop journals this call and receipts are enabled."""
        receipts = self.agent.context.session.receipts
        identity = self.call_identity
        if receipts is None or identity is None:
            return None
        call_id, args_digest = identity
        return (receipts, call_id, args_digest)

    async def _command(self, session: ShellSession, runtime: str, code: str) -> str:
        if runtime == "terminal":
            return code
        if runtime == "python":
            path = await session.put_file("code.py", code)
            python = "python3" if session.remote else sys.executable
            return f"{shlex.quote(python)} {shlex.quote(path)}"
        path = await session.put_file("code.js", code)
        node = "node" if session.remote else shutil.which("node") or "node"
        return f"{shlex.quote(node)} {shlex.quote(path)}"

    async def _on_poll(self, output: str) -> None:
        self.set_progress(output)
        if self.log is not None:
            self.log.update(content=self.agent.mask(truncate_text(output, MAX_OUTPUT_CHARS)))
        await self.agent.handle_intervention()

    @staticmethod
    def _busy_text(number: int, reason: str) -> str:
        return (
            f"Session {number}: {reason}. Read more with runtime 'output', type into it with "
            f"the input tool, or use runtime 'reset' to kill it."
        )

    @classmethod
    def receipt_response(cls, output: str, exit_code: int, number: int = 0) -> Response:
        """The response a completed shell receipt stands for (used by recovery to reuse it)."""
        result = CommandResult(output=output, exit_code=exit_code, running=False)
        return Response(cls._result_text(result, number), break_loop=False)

    @staticmethod
    def _result_text(result: CommandResult, number: int) -> str:
        output = truncate_text(result.output, MAX_OUTPUT_CHARS) or "(no output)"
        if result.running:
            note = {
                "first_output": "no output yet",
                "between_output": "no new output for a while",
                "total": "the time limit for one call was reached",
            }.get(result.timed_out or "", "still running")
            return (
                f"{output}\n[session {number}: the command is still running ({note}). "
                f"Use runtime 'output' to wait for more, the input tool to answer a prompt, "
                f"or runtime 'reset' to stop it.]"
            )
        if result.session_ended:
            return f"{output}\n[session {number}: the shell exited with code {result.exit_code}]"
        return f"{output}\n[exit code {result.exit_code}]"


async def open_session(agent: Any, number: int, any_kind: bool = False) -> ShellSession | Response:
    """Session ``number``, on the SSH host when ``code_exec_ssh_enabled`` is on; a refusal
    (``Response``) when that host cannot be used: the command never runs elsewhere instead."""
    from durability.adapters.ssh import SshError
    from python.helpers.ssh_shell import SshShellSession, target_from_settings

    target = target_from_settings(agent.config.settings, files.usr_dir())
    shells = agent.context.shells
    inbox = terminal_inbox(agent, number)
    try:
        return await shells.get(
            number, ssh=target, any_kind=any_kind, remote=SshShellSession, terminal=inbox
        )
    except SshError as e:
        return ssh_refusal(number, e)
    except Exception as e:  # the link broke while the session started
        if target is None:
            raise
        return ssh_refusal(number, e)


def terminal_inbox(agent: Any, number: int) -> Path | None:
    """Where a local session's terminal takes inputs and proves their delivery: in the
    receipts folder when the chat journals its calls (it then survives a restart)."""
    from durability.adapters.pty import terminal_dir

    receipts = getattr(agent.context.session, "receipts", None)
    if receipts is None or not isinstance(getattr(agent.context, "id", None), str):
        return None
    return terminal_dir(receipts.folder, agent.context.id, number)


def ssh_refusal(number: int, error: Exception) -> Response:
    """The tool's answer when the SSH session cannot start: nothing ran anywhere."""
    code = getattr(error, "code", "ssh_connect_failed")
    if not isinstance(code, str) or not code.startswith("ssh_"):
        code = "ssh_connect_failed"
    return Response(
        f"Session {number}: cannot run over SSH [{code}]: {error}. Nothing was run.",
        break_loop=False,
    )


def first_use_notice(session: ShellSession) -> str:
    """Once per session: the host key recorded at the first connection (trust on first use)."""
    key = getattr(session, "first_use", None)
    if not key or getattr(session, "first_use_shown", False):
        return ""
    session.first_use_shown = True  # type: ignore[attr-defined]
    return f"[ssh: first connection to this host; key recorded in usr/ssh/known_hosts: {key}]\n"
