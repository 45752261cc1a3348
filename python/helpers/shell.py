"""Persistent bash sessions: a local one runs on a pseudo-terminal owned by a relay process.

A local session's bash runs on a terminal owned by a relay (durability/adapters/pty_relay.py,
started by python/helpers/terminal.py) that outlives the server: the terminal is every
program's standard input, so interactive programs prompt as they would for a person, and
text typed into them (``send_input``) is handed to the relay as a file and confirmed by its
delivery marker (durability/adapters/pty.py). A session given a durable inbox (``terminal``)
finds a relay left by a server that died and adopts its running command: the output is read
from the command's receipt, its end from the exit marker. An SSH session runs the same relay
on its host when the host has python3 (python/helpers/ssh_shell.py), a pipe otherwise.

Each command is written to a private script file and sourced by the session's bash, on
one line followed by a sentinel `printf` carrying `$?`. The sentinel tells when the
command finished and with which exit code; sourcing keeps the shell's state (cwd,
variables) between commands and survives syntax errors in the command itself.

With a receipt context (`run(..., receipt=(receipts, call_id, args_digest))`) the line is
`ShellReceipts.wrap(...)` instead of the plain `. <file>`: the shell writes start and exit
markers itself and the command's output goes to a file in the receipts folder, which the
session tails. The command therefore never writes to the agent's pipe and keeps running
(and gets its exit marker) if the agent process dies.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durability.adapters.pty import TerminalInbox
from durability.adapters.shell import ReceiptError
from python.helpers import terminal

READ_CHUNK = 65536
POLL_INTERVAL = 0.5  # on_poll is called at least this often while waiting
TAIL_INTERVAL = 0.1  # how often a receipt's output file is read while waiting
# Never inherited by the agent's shells: keys, tokens, passwords, and the shared journal's
# DSN and resource key (a container passes all of them to the server as variables).
SECRET_ENV = re.compile(r"(API_KEY|API_TOKEN|PASSWORD|SECRET|_TOKEN$|_KEY$|_DSN$)", re.IGNORECASE)

OnPoll = Callable[[str], Awaitable[None]]
#: (ShellReceipts, call_id, args_digest): the call a command's receipt names.
Receipt = tuple[Any, str, str]


@dataclass
class Timeouts:
    first_output: float = 30.0
    between_output: float = 15.0
    total: float = 180.0

    @classmethod
    def from_settings(cls, settings: dict) -> Timeouts:
        return cls(
            first_output=float(settings.get("code_exec_first_output_timeout", 30)),
            between_output=float(settings.get("code_exec_between_output_timeout", 15)),
            total=float(settings.get("code_exec_max_timeout", 180)),
        )


@dataclass
class CommandResult:
    """New output since the last result; exit_code is None while still running."""

    output: str
    exit_code: int | None
    running: bool
    timed_out: str | None = None  # "first_output" | "between_output" | "total"
    session_ended: bool = False


class ShellError(Exception):
    code = "shell_error"


class ReceiptRefused(ShellError):
    """No receipt can be written for this call (bad identity or one exists): nothing ran."""

    code = "receipt_refused"


class _OutputTail:
    """Reads what the shell appends to a command's output file (opened once it exists)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read(self, final: bool = False) -> str:
        if self._file is None:
            try:
                self._file = open(self.path, "rb")  # noqa: SIM115 - kept open while tailing
            except FileNotFoundError:
                return self._decoder.decode(b"", final=True) if final else ""
        chunks = []
        while chunk := self._file.read(READ_CHUNK):
            chunks.append(chunk)
        return self._decoder.decode(b"".join(chunks), final=final)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class ShellSession:
    """One long-lived bash process with merged stdout/stderr."""

    remote = False  # True for sessions on another host (python/helpers/ssh_shell.py)
    tail_interval = TAIL_INTERVAL

    def __init__(
        self, cwd: Path, env: dict[str, str] | None = None, terminal: Path | None = None
    ) -> None:
        self.cwd = Path(cwd)
        self.env = env
        self.dir = Path(tempfile.mkdtemp(prefix="a0-shell-"))
        self.durable_inbox = terminal is not None  # kept across restarts (receipts folder)
        self.inbox = TerminalInbox(terminal or self.dir / "terminal")
        self.relay: dict[str, Any] | None = None  # relay.json of the terminal in use
        self.adopted: dict[str, Any] | None = None  # the command of a relay left behind
        self.proc: asyncio.subprocess.Process | None = None
        self._buf = ""
        self._data = asyncio.Event()
        self._eof = False
        self._reader: asyncio.Task | None = None
        self._marker = ""
        self._count = 0
        self._tail: Any = None  # _OutputTail (or a remote session's tail)
        self.running = False

    # -- lifecycle ------------------------------------------------------------
    @property
    def alive(self) -> bool:
        if self.adopted is not None:  # usable while the command it adopted runs
            return self.running and terminal.pid_alive((self.relay or {}).get("pid"))
        return self.proc is not None and self.proc.returncode is None and not self._eof

    @property
    def shell_pid(self) -> int | None:
        """The pid of the session's bash (on a terminal: the relay's child)."""
        if self.relay is not None and isinstance(self.relay.get("shell_pid"), int):
            return int(self.relay["shell_pid"])
        return self.proc.pid if self.proc is not None else None

    async def start(self) -> None:
        self.cwd.mkdir(parents=True, exist_ok=True)
        self._buf, self._eof, self.running = "", False, False
        self._data = asyncio.Event()
        if not self.durable_inbox:
            self.inbox = TerminalInbox(self.dir / "terminal")
        elif await self._adopt():
            return
        env = self.env if self.env is not None else child_environment()
        self.proc, self.relay = await terminal.spawn_relay(self.inbox.folder, self.cwd, env)
        self._reader = asyncio.create_task(self._read_loop(self.proc))

    async def _adopt(self) -> bool:
        """Take over the terminal a previous server left, when its command still runs."""
        left = await asyncio.to_thread(terminal.find_relay, self.inbox.folder)
        command = terminal.read_json(self.inbox.folder / terminal.COMMAND_FILE)
        if left is None:
            return False
        if command is None or Path(str(command.get("exit"))).exists():
            terminal.kill_terminal(left)  # nothing runs there that anyone waits for
            return False
        self.relay, self.adopted, self.running = left, command, True
        self._marker = "\x1e" + f"__A0_ADOPTED_{secrets.token_hex(8)}__:"
        self._tail = _OutputTail(Path(str(command.get("out"))))
        self._tail.read()  # what it printed before the restart was reported then
        return True

    async def close(self) -> None:
        """Kill the terminal (relay, shell and its programs) and remove the private folder."""
        proc, self.proc = self.proc, None
        relay, self.relay, self.adopted = self.relay, None, None
        terminal.kill_terminal(relay)
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await proc.wait()
        if relay is not None and self.durable_inbox:
            with contextlib.suppress(OSError):
                (self.inbox.folder / "relay.json").unlink()
        await self._closed()

    async def _closed(self) -> None:
        """The end of every ``close``: stop the reader, forget the output, drop the folder."""
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        self.running = False
        self._close_tail()
        shutil.rmtree(self.dir, ignore_errors=True)

    async def _read_loop(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        await self._pump(proc.stdout.read)

    async def _pump(self, read: Callable[[int], Awaitable[bytes]]) -> None:
        """Decode the shell's stdout into the buffer until it ends (b"")."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            chunk = await read(READ_CHUNK)
            if not chunk:
                self._buf += decoder.decode(b"", final=True)
                self._eof = True
                self._data.set()
                return
            self._buf += decoder.decode(chunk)
            self._data.set()

    # -- commands -------------------------------------------------------------
    def write_file(self, name: str, text: str) -> Path:
        """Write a private file (e.g. code for a runtime) into the session folder."""
        path = self.dir / name
        path.write_text(text, encoding="utf-8")
        return path

    async def put_file(self, name: str, text: str) -> str:
        """``write_file`` on the host that runs the session; returns the path there."""
        return str(self.write_file(name, text))

    async def _command_line(self, command: str, receipt: Receipt | None) -> str:
        """The bash that runs ``command`` (inside the receipt wrapper when there is one)."""
        script = self.write_file(f"cmd_{self._count}.sh", command + "\n")
        if receipt is None:
            return f". {shlex.quote(str(script))}"
        receipts, call_id, args_digest = receipt
        try:
            body = str(receipts.wrap(call_id, args_digest, script))
        except ReceiptError as e:
            raise ReceiptRefused(f"no receipt can be written for this call ({e.code})") from e
        self._tail = _OutputTail(receipts.output_path(call_id))
        if self.durable_inbox and not self.remote:  # for a server that adopts the terminal
            where = {"call_id": call_id, "out": str(receipts.output_path(call_id))}
            where["exit"] = str(receipts.exit_path(call_id))
            path = self.inbox.folder / terminal.COMMAND_FILE
            path.with_suffix(".tmp").write_text(json.dumps(where), encoding="utf-8")
            os.replace(path.with_suffix(".tmp"), path)
        return body

    async def _pull(self) -> None:
        """Hook: a remote session fetches its output file here (local files are read); an
        adopted command's end is its exit marker (no sentinel comes on a pipe)."""
        if self.adopted is None or not self._marker:
            return
        code = terminal.exit_code_of(Path(str(self.adopted.get("exit"))))
        if code is not None:
            self._buf += f"{self._marker}{code}\n"
            self._data.set()
        elif not terminal.pid_alive((self.relay or {}).get("pid")):
            self._eof = True

    async def run(
        self,
        command: str,
        timeouts: Timeouts,
        on_poll: OnPoll | None = None,
        receipt: Receipt | None = None,
    ) -> CommandResult:
        """Run `command` and wait for its end or a time-out (it then keeps running).

        With `receipt`, the shell proves the command's start and end in the receipts folder.
        """
        if self.running:
            raise ShellError("a command is still running in this session")
        if not self.alive:
            await self.close()
            self.dir = Path(tempfile.mkdtemp(prefix="a0-shell-"))
            await self.start()
        self._count += 1
        self._buf = ""
        self._close_tail()
        body = await self._command_line(command, receipt)
        token = f"__A0_DONE_{secrets.token_hex(8)}__"
        self._marker = "\x1e" + token + ":"  # ASCII record separator: never typical output
        line = f"{body}; printf '\\036%s:%d\\n' {token} \"$?\"\n"
        await self._write(line)
        self.running = True
        return await self._wait(timeouts, on_poll)

    async def read_more(self, timeouts: Timeouts, on_poll: OnPoll | None = None) -> CommandResult:
        """Keep waiting for the running command; return the output since last time."""
        if not self.running:
            return CommandResult(output=self._take_all(), exit_code=None, running=False)
        return await self._wait(timeouts, on_poll)

    async def send_input(
        self, text: str, identity: tuple[str, str] | None = None
    ) -> dict[str, Any] | None:
        """Type `text` (plus newline) into the running command's standard input.

        On a local terminal the bytes are handed to the relay (``identity``: the call id and
        argument digest the delivery marker names) and this returns once the relay's
        delivery marker is on disk (the marker); an SSH session writes to its pipe (None)."""
        if not self.alive:
            raise ShellError("the session is not running")
        data = text if text.endswith("\n") else text + "\n"
        if self.relay is None:
            await self._write(data)
            return None
        call_id, args_digest = identity or (f"i{secrets.token_hex(8)}", "0" * 64)
        relay_pid = self.relay.get("pid")
        try:
            await asyncio.to_thread(self.inbox.hand_over, call_id, args_digest, data.encode())
            marker = await asyncio.to_thread(
                self.inbox.wait_delivered, call_id, lambda: terminal.pid_alive(relay_pid), 60
            )
        except Exception as e:
            raise ShellError(f"the input was not delivered ({e})") from e
        if identity is None:
            self.inbox.discard(call_id)
        return marker

    async def record_input(self, receipt: Receipt) -> None:
        """Hook before an input is handed over: an SSH session records where its delivery
        receipt will be (a local terminal's inbox is found from the chat and session)."""

    async def _write(self, text: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(text.encode("utf-8"))
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as e:
            raise ShellError("the session ended") from e

    async def _wait(self, timeouts: Timeouts, on_poll: OnPoll | None) -> CommandResult:
        loop = asyncio.get_running_loop()
        start = last = polled = loop.time()
        got_output = False
        pending = ""
        while True:
            await self._pull()
            done = self._finished()
            if done is not None:
                return CommandResult(pending + done[0], done[1], running=False)
            if self._eof:
                self.running = False
                rc = await self._returncode()
                out = pending + self._take_all()
                return CommandResult(out, rc, running=False, session_ended=True)
            fresh = self._take_safe()
            if fresh:
                pending += fresh
                got_output = True
                last = loop.time()
                if on_poll is not None:
                    await on_poll(pending)
            now = loop.time()
            if now - start >= timeouts.total:
                return CommandResult(pending, None, running=True, timed_out="total")
            if got_output and now - last >= timeouts.between_output:
                return CommandResult(pending, None, running=True, timed_out="between_output")
            if not got_output and now - start >= timeouts.first_output:
                return CommandResult(pending, None, running=True, timed_out="first_output")
            limit = timeouts.between_output if got_output else timeouts.first_output
            deadline = min(start + timeouts.total, (last if got_output else start) + limit)
            self._data.clear()
            if self._eof:
                continue
            interval = self.tail_interval if self._tail is not None else POLL_INTERVAL
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._data.wait(), min(deadline - now, interval))
            quiet = not self._data.is_set()
            due = self._tail is None or loop.time() - polled >= POLL_INTERVAL
            if on_poll is not None and quiet and due:
                polled = loop.time()
                await on_poll(pending)

    def _finished(self) -> tuple[str, int] | None:
        if not self._marker:
            return None
        m = re.search(re.escape(self._marker) + r"(\d+)\n", self._buf)
        if m is None:
            return None
        if self.durable_inbox:
            with contextlib.suppress(OSError):
                (self.inbox.folder / terminal.COMMAND_FILE).unlink()
        out = self._read_tail(final=True) + self._buf[: m.start()]
        self._close_tail()
        self._buf = self._buf[m.end() :]
        self.running = False
        self._marker = ""
        return out, int(m.group(1))

    def _take_safe(self) -> str:
        """Take buffered output, holding back a tail that may be a partial sentinel."""
        hold = 0
        for k in range(min(len(self._marker) + 12, len(self._buf)), 0, -1):
            tail = self._buf[-k:]
            if self._marker.startswith(tail) or (
                tail.startswith(self._marker) and tail[len(self._marker) :].isdigit()
            ):
                hold = k
                break
        out, self._buf = self._buf[: len(self._buf) - hold], self._buf[len(self._buf) - hold :]
        return self._read_tail() + out

    def _take_all(self) -> str:
        out, self._buf = self._read_tail(final=True) + self._buf, ""
        self._close_tail()
        return out

    def _read_tail(self, final: bool = False) -> str:
        return self._tail.read(final) if self._tail is not None else ""

    def _close_tail(self) -> None:
        if self._tail is not None:
            self._tail.close()
            self._tail = None

    async def _returncode(self) -> int | None:
        if self.proc is None:
            return None
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(self.proc.wait(), 5)
        return None


def child_environment() -> dict[str, str]:
    """The process environment without secrets, unbuffered and without colours."""
    env = {k: v for k, v in os.environ.items() if not SECRET_ENV.search(k)}
    env.update({"PYTHONUNBUFFERED": "1", "TERM": "dumb", "NO_COLOR": "1", "PAGER": "cat"})
    return env


class ShellSessions:
    """Numbered sessions of one chat, created on first use."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = Path(cwd)
        self.sessions: dict[int, ShellSession] = {}

    async def get(
        self,
        number: int,
        ssh: Any = None,
        any_kind: bool = False,
        remote: Callable[[Any, Path, Path | None], ShellSession] | None = None,
        terminal: Path | None = None,
    ) -> ShellSession:
        """Session ``number``: local, or on the SSH target ``ssh`` (an ``SshTarget``), made
        by ``remote(ssh, cwd, terminal)`` (python/helpers/ssh_shell.py's ``SshShellSession``).

        A session of the other kind (or for another target) is closed and replaced, as
        upstream drops its sessions when SSH is switched; ``any_kind`` keeps whatever runs
        (the input tool types into the session that exists). ``terminal``: the session's
        durable inbox (a relay left there by a previous server is adopted; an SSH session's
        inbox on its host is named after it)."""
        session = self.sessions.get(number)
        if session is not None and not any_kind and getattr(session, "target", None) != ssh:
            await session.close()
            session = None
        if session is None or not session.alive:
            if session is not None:
                await session.close()
            if ssh is None:
                session = ShellSession(self.cwd, terminal=terminal)
            elif remote is None:
                raise ShellError("no SSH session type was given")
            else:
                session = remote(ssh, self.cwd, terminal)
            self.sessions[number] = session
            try:
                await session.start()
            except BaseException:
                self.sessions.pop(number, None)
                await session.close()
                raise
        return session

    async def reset(self, number: int) -> None:
        session = self.sessions.pop(number, None)
        if session is not None:
            await session.close()

    async def close_all(self) -> None:
        for number in list(self.sessions):
            await self.reset(number)
