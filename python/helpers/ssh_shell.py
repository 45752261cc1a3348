"""Bash sessions on another host over SSH (asyncssh), with the local session's interface.

``SshShellSession`` is a ``ShellSession`` whose bash runs on the remote host: the same
sentinel tells when a command ends, and a journaled command runs inside the same receipt
wrapper (``durability.adapters._wrapper.wrap_command``), writing its markers and output into
a private folder on the remote host (``~/.a0-durable/receipts``, 0700). Before the command
is sent, a ``<call_id>.remote`` pointer is written durably into the local receipts folder,
so a crash never reads as "never started" here (docs/receipts.md, "SSH receipts").
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import re
import shlex
from pathlib import Path
from typing import Any

from durability.adapters._wrapper import ReceiptError, wrap_command
from durability.adapters.ssh import (
    SshError,
    SshTarget,
    connect,
    remote_folder,
)
from python.helpers.shell import Receipt, ReceiptRefused, ShellError, ShellSession

KNOWN_HOSTS = "ssh/known_hosts"  # under usr/


def target_from_settings(settings: dict[str, Any], usr: Path) -> SshTarget | None:
    """The SSH target the settings name, or None when commands run locally."""
    if not settings.get("code_exec_ssh_enabled"):
        return None
    key_file = str(settings.get("code_exec_ssh_key_file") or "")
    if key_file and not Path(key_file).is_absolute():
        key_file = str(Path(usr) / key_file)
    return SshTarget(
        host=str(settings.get("code_exec_ssh_addr") or "localhost"),
        port=int(settings.get("code_exec_ssh_port") or 22),
        user=str(settings.get("code_exec_ssh_user") or "root"),
        password=str(settings.get("code_exec_ssh_pass") or ""),
        key_file=key_file,
        known_hosts=str(Path(usr) / KNOWN_HOSTS),
    )


class _RemoteTail:
    """The part of a remote output file fetched so far (``tail -c +N`` over the link)."""

    def __init__(self, conn: Any, path: str) -> None:
        self.conn, self.path, self.offset = conn, path, 0
        self._pending = b""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    async def fetch(self) -> None:
        q = shlex.quote(self.path)
        cmd = f"[ -e {q} ] && tail -c +{self.offset + 1} -- {q} || true"
        result = await self.conn.run(cmd, check=False, encoding=None)
        data = bytes(result.stdout or b"")
        self.offset += len(data)
        self._pending += data

    def read(self, final: bool = False) -> str:
        data, self._pending = self._pending, b""
        return self._decoder.decode(data, final=final)

    def close(self) -> None:
        self._pending = b""


class SshShellSession(ShellSession):
    """One long-lived bash on the SSH target; output and receipts as locally."""

    remote = True
    tail_interval = 0.25  # each look at the output file is a round trip

    def __init__(self, target: SshTarget, cwd: Path) -> None:
        super().__init__(cwd)
        self.target = target
        self.conn: Any = None
        self.remote_dir = ""
        self.receipts_folder = ""
        self.first_use: str | None = None  # the key line recorded at the first connection
        self.channel: Any = None  # the asyncssh process running bash on the host
        self._pid = 0
        self._tail_complete = False

    @property
    def alive(self) -> bool:
        return self.channel is not None and not self._eof and self.conn is not None

    async def start(self) -> None:
        try:
            connected = await connect(self.target)
        except SshError:
            raise
        self.conn = connected.conn
        self.first_use = self.first_use or connected.first_use
        self.receipts_folder = await remote_folder(self.conn, self.target.receipts)
        made = await self.conn.run("umask 077; mktemp -d /tmp/a0-shell-XXXXXXXX", check=False)
        if made.exit_status != 0:
            raise SshError("cannot create a private folder on the host")
        self.remote_dir = str(made.stdout).strip()
        import asyncssh

        proc = await self.conn.create_process(
            'echo "$$"; exec bash --noprofile --norc',
            stderr=asyncssh.STDOUT,
            encoding=None,
            env={"TERM": "dumb", "NO_COLOR": "1", "PAGER": "cat", "PYTHONUNBUFFERED": "1"},
        )
        first = await asyncio.wait_for(proc.stdout.readline(), 30)
        self._pid = int(first.strip() or 0)
        self.channel = proc
        self._buf, self._eof, self.running = "", False, False
        self._data = asyncio.Event()
        self._reader = asyncio.create_task(self._read_remote(proc))

    async def _read_remote(self, proc: Any) -> None:
        async def read(size: int) -> bytes:
            try:
                chunk: bytes = await proc.stdout.read(size)
            except Exception:  # the link broke: like the end of the shell
                return b""
            return chunk

        await self._pump(read)

    async def close(self) -> None:
        """Kill the remote shell's process group, remove its folder, close the link."""
        proc, self.channel = self.channel, None
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                cleanup = f"rm -rf -- {shlex.quote(self.remote_dir)}" if self.remote_dir else ":"
                if self._pid > 0:
                    cleanup = f"kill -9 -- -{self._pid} {self._pid} 2>/dev/null; {cleanup}"
                await asyncio.wait_for(conn.run(cleanup, check=False), 10)
            with contextlib.suppress(Exception):
                if proc is not None:
                    proc.close()
                conn.close()
        await self._closed()

    async def put_file(self, name: str, text: str) -> str:
        if self.conn is None:
            raise ShellError("the session is not running")
        path = f"{self.remote_dir}/{name}"
        result = await self.conn.run(
            f"umask 077; cat > {shlex.quote(path)}", input=text, check=False
        )
        if result.exit_status != 0:
            raise ShellError(f"cannot write {name} on the host")
        return path

    async def _command_line(self, command: str, receipt: Receipt | None) -> str:
        script = await self.put_file(f"cmd_{self._count}.sh", command + "\n")
        if receipt is None:
            return f". {shlex.quote(script)}"
        receipts, call_id, args_digest = receipt
        base = f"{self.receipts_folder}/{call_id}"
        try:
            exists = await self.conn.run(
                f"[ -e {shlex.quote(base + '.start')} ] || [ -e {shlex.quote(base + '.exit')} ]",
                check=False,
            )
            if exists.exit_status == 0:
                raise ReceiptError("a receipt for this call already exists on the host")
            where = {"ssh": self.target.describe() | {"folder": self.receipts_folder}}
            # the local pointer and the journal's record (a blocking write): off the loop
            await asyncio.to_thread(receipts.mark_remote, call_id, args_digest, where)
            body = wrap_command(self.receipts_folder, call_id, args_digest, script)
        except ReceiptError as e:
            raise ReceiptRefused(f"no receipt can be written for this call ({e.code})") from e
        self._tail = _RemoteTail(self.conn, base + ".out")
        self._tail_complete = False
        return body

    async def _pull(self) -> None:
        if not isinstance(self._tail, _RemoteTail):
            return
        # the sentinel seen before the fetch: the file was complete when it was read
        seen = bool(self._marker) and self._marker in self._buf
        with contextlib.suppress(Exception):
            await self._tail.fetch()
            self._tail_complete = seen

    def _finished(self) -> tuple[str, int] | None:
        if isinstance(self._tail, _RemoteTail) and not self._tail_complete:
            return None
        return super()._finished()

    def _take_safe(self) -> str:
        # the sentinel may arrive while the output file is fetched: keep it for _finished
        if self._marker:
            m = re.search(re.escape(self._marker) + r"\d+\n", self._buf)
            if m is not None:
                out, self._buf = self._buf[: m.start()], self._buf[m.start() :]
                return self._read_tail() + out
        return super()._take_safe()

    async def _write(self, text: str) -> None:
        if self.channel is None:
            raise ShellError("the session is not running")
        try:
            self.channel.stdin.write(text.encode("utf-8"))
            await self.channel.stdin.drain()
        except Exception as e:
            raise ShellError("the session ended") from e

    async def _returncode(self) -> int | None:
        proc = self.channel
        if proc is None:
            return None
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait_closed(), 5)
        status = getattr(proc, "exit_status", None)
        return status if isinstance(status, int) else None
