"""Bash sessions on another host over SSH (asyncssh), with the local session's interface.

``SshShellSession`` is a ``ShellSession`` whose bash runs on the remote host: the same
sentinel tells when a command ends, and a journaled command runs inside the same receipt
wrapper (``durability.adapters._wrapper.wrap_command``), writing its markers and output into
a private folder on the remote host (``~/.a0-durable/receipts``, 0700). Before the command
is sent, a ``<call_id>.remote`` pointer is written durably into the local receipts folder,
so a crash never reads as "never started" here (docs/receipts.md, "SSH receipts").

Interactive programs run on a pseudo-terminal there too: when the host has python3 (3.9+),
the session copies the terminal relay (durability/adapters/pty_relay.py) into
``~/.a0-durable/`` and runs it with that python3; the relay owns the terminal, outlives the
SSH connection and the server, and delivers each ``input`` handed over as an atomically
renamed file in its inbox ``~/.a0-durable/pty/<key>``, writing a fsynced delivery marker.
A server that restarts finds the relay and adopts the command it still runs. A host without
python3 gets today's pipe (``no_relay`` says why): typed input then has no delivery receipt.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import posixpath
import re
import secrets
import shlex
from pathlib import Path
from typing import Any

from durability.adapters import pty_relay
from durability.adapters._wrapper import ReceiptError, ReceiptExists, wrap_command
from durability.adapters.pty import handover_bytes
from durability.adapters.ssh import (
    SshError,
    SshTarget,
    connect,
    remote_folder,
)
from python.helpers.shell import Receipt, ReceiptRefused, ShellError, ShellSession

KNOWN_HOSTS = "ssh/known_hosts"  # under usr/
RELAY_SOURCE = Path(pty_relay.__file__).read_text(encoding="utf-8")
DELIVERY_WAIT = 1200  # looks at the marker, 0.05 s apart (one minute), in one round trip
NO_PYTHON = (
    "the SSH host has no python3 (3.9 or later): typed input goes through a pipe, without a "
    "delivery receipt (after a crash such an input is held for a person)"
)


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

    python = "python3"  # the host's interpreter for the relay

    def __init__(self, target: SshTarget, cwd: Path, terminal: Path | None = None) -> None:
        super().__init__(cwd)
        self.target = target
        self.conn: Any = None
        self.remote_dir = ""
        self.receipts_folder = ""
        self.first_use: str | None = None  # the key line recorded at the first connection
        self.channel: Any = None  # the asyncssh process running bash on the host
        self._pid = 0
        self._tail_complete = False
        self.terminal_key = terminal.name if terminal is not None else ""
        self.remote_inbox = ""  # the relay's inbox on the host
        self.relay_script = ""
        self.no_relay: str | None = None  # why typed input has no delivery receipt here

    @property
    def alive(self) -> bool:
        if self.conn is None or self._eof:
            return False
        if self.adopted is not None:  # usable while the command it adopted runs
            return self.running
        return self.channel is not None

    async def start(self) -> None:
        connected = await connect(self.target)
        self.conn = connected.conn
        self.first_use = self.first_use or connected.first_use
        self.receipts_folder = await remote_folder(self.conn, self.target.receipts)
        made = await self.conn.run("umask 077; mktemp -d /tmp/a0-shell-XXXXXXXX", check=False)
        if made.exit_status != 0:
            raise SshError("cannot create a private folder on the host")
        self.remote_dir = str(made.stdout).strip()
        base = posixpath.dirname(self.receipts_folder)
        if self.terminal_key:
            self.remote_inbox = f"{base}/pty/{self.terminal_key}"
        else:
            self.remote_inbox = f"{self.remote_dir}/terminal"
        self._buf, self._eof, self.running = "", False, False
        self._data = asyncio.Event()
        self.relay_script = await self._install_relay(base)
        self.no_relay = None if self.relay_script else NO_PYTHON
        if self.relay_script and self.terminal_key and await self._adopt_remote():
            return
        q = shlex.quote
        if self.relay_script:
            line = f"exec {self.python} {q(self.relay_script)} --announce {q(self.remote_inbox)} ."
            command = f"umask 077; {line}"
        else:
            command = 'echo "$$"; exec bash --noprofile --norc'
        import asyncssh

        proc = await self.conn.create_process(
            command,
            stderr=asyncssh.STDOUT,
            encoding=None,
            env={"TERM": "dumb", "NO_COLOR": "1", "PAGER": "cat", "PYTHONUNBUFFERED": "1"},
        )
        first = await asyncio.wait_for(proc.stdout.readline(), 30)
        if self.relay_script:
            self.relay = json.loads(first.decode("utf-8"))
            self._pid = int(self.relay["shell_pid"])
        else:
            self._pid = int(first.strip() or 0)
        self.channel = proc
        self._reader = asyncio.create_task(self._read_remote(proc))

    async def _install_relay(self, base: str) -> str:
        """Copy the relay next to the remote receipts (0700); its path, or "" when the host
        has no python3 that can run it."""
        q, py = shlex.quote, self.python
        path = f"{base}/{pty_relay.__name__.rsplit('.', 1)[-1]}.py"
        tmp = f"{path}.{secrets.token_hex(4)}"
        check = f"{q(py)} -c 'import sys; sys.exit(sys.version_info < (3, 9))'"
        script = (
            f"umask 077; command -v {q(py)} >/dev/null 2>&1 && {check} && "
            f"mkdir -p {q(base)}/pty && chmod 700 {q(base)} && cat > {q(tmp)} && "
            f"mv -f -- {q(tmp)} {q(path)} && echo ok"
        )
        result = await self.conn.run(script, input=RELAY_SOURCE, check=False)
        return path if str(result.stdout).strip() == "ok" else ""

    async def _adopt_remote(self) -> bool:
        """Take over the terminal a previous server left on the host, when its command
        still runs (its output from the receipt, its end from the exit marker)."""
        q = shlex.quote
        found = await self.conn.run(
            f"{q(self.python)} {q(self.relay_script)} --status {q(self.remote_inbox)}",
            check=False,
        )
        try:
            status = json.loads(str(found.stdout))
        except ValueError:
            return False
        left, command = status.get("relay"), status.get("command")
        if not isinstance(left, dict) or not status.get("alive"):
            return False
        if not isinstance(command, dict) or status.get("done"):
            await self._kill_remote(left)  # nothing runs there that anyone waits for
            return False
        self.relay, self.adopted, self.running = left, command, True
        self._pid = int(left.get("shell_pid") or 0)
        self._marker = "\x1e" + f"__A0_ADOPTED_{secrets.token_hex(8)}__:"
        self._tail = _RemoteTail(self.conn, str(command.get("out")))
        await self._tail.fetch()
        self._tail.read()  # what it printed before the restart was reported then
        return True

    async def _kill_remote(self, relay: dict[str, Any] | None) -> None:
        pids = [(relay or {}).get("shell_pid"), (relay or {}).get("pid")]
        groups = " ".join(f"-{int(p)}" for p in pids if isinstance(p, int) and p > 0)
        if groups:
            await self.conn.run(f"kill -9 -- {groups} 2>/dev/null", check=False)

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
        relay, self.relay, self.adopted = self.relay, None, None
        if conn is not None:
            with contextlib.suppress(Exception):
                cleanup = f"rm -rf -- {shlex.quote(self.remote_dir)}" if self.remote_dir else ":"
                if self._pid > 0:
                    cleanup = f"kill -9 -- -{self._pid} {self._pid} 2>/dev/null; {cleanup}"
                if relay is not None and isinstance(relay.get("pid"), int):
                    inbox = shlex.quote(self.remote_inbox)
                    cleanup = f"kill -9 -- -{relay['pid']} 2>/dev/null; {cleanup}"
                    cleanup += f"; rm -f -- {inbox}/relay.json {inbox}/command.json"
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
        if self.relay is None:
            return body
        # for a server that adopts the terminal: the command it runs, before it runs
        running = json.dumps({"call_id": call_id, "out": base + ".out", "exit": base + ".exit"})
        record = shlex.quote(f"{self.remote_inbox}/command.json")
        save = f"printf '%s' {shlex.quote(running)} > {record}.tmp && mv -f {record}.tmp {record}"
        return f"{save}; {body}"

    async def record_input(self, receipt: Receipt) -> None:
        """Before an input is handed over: a ``.remote`` pointer (and the journal's
        ``receipt_location``) naming the terminal's inbox on the host, where recovery reads
        its delivery receipt. A call run again after "not delivered" keeps its pointer."""
        receipts, call_id, args_digest = receipt
        ssh = self.target.describe() | {"folder": self.receipts_folder}
        where = {"ssh": ssh | {"inbox": self.remote_inbox}}
        try:
            await asyncio.to_thread(receipts.mark_remote, call_id, args_digest, where)
        except ReceiptExists as e:
            pointer = receipts.remote_pointer(call_id) or {}
            same = (pointer.get("ssh") or {}).get("inbox") == self.remote_inbox
            if not same or pointer.get("args_digest") != args_digest:
                raise ReceiptRefused(f"no receipt can be written for this call ({e.code})") from e
        except ReceiptError as e:
            raise ReceiptRefused(f"no receipt can be written for this call ({e.code})") from e

    async def send_input(
        self, text: str, identity: tuple[str, str] | None = None
    ) -> dict[str, Any] | None:
        """Hand the text to the relay on the host (a file written, fsynced and renamed into
        its inbox) and wait, in the same round trip, for its delivery marker; without a
        relay (no python3 there) the text goes to the shell's pipe."""
        if self.relay is None:
            return await super().send_input(text, identity)
        if not self.alive:
            raise ShellError("the session is not running")
        data = (text if text.endswith("\n") else text + "\n").encode("utf-8")
        call_id, args_digest = identity or (f"i{secrets.token_hex(8)}", "0" * 64)
        q, inbox = shlex.quote, self.remote_inbox
        base = f"{inbox}/{call_id}"
        tmp, handed, marker, refused = (
            q(base + s) for s in (".input.tmp", ".input", ".delivered", ".refused")
        )
        pid = int(self.relay.get("pid") or 0)
        script = (
            f"umask 077; cat > {tmp} && sync -- {tmp} && mv -f -- {tmp} {handed} && "
            f"sync -- {q(inbox)} || exit 7; i=0; while [ $i -lt {DELIVERY_WAIT} ]; do "
            f"[ -e {marker} ] && {{ cat {marker}; exit 0; }}; [ -e {refused} ] && exit 4; "
            f"kill -0 {pid} 2>/dev/null || "
            f"{{ [ -e {marker} ] && {{ cat {marker}; exit 0; }}; exit 5; }}; "
            f"sleep 0.05; i=$((i+1)); done; exit 6"
        )
        why = {4: "the terminal refused the input", 5: "the terminal ended", 7: "no handover"}
        try:
            handover = handover_bytes(call_id, args_digest, data)
            result = await self.conn.run(script, input=handover, encoding=None, check=False)
            if result.exit_status != 0:
                reason = why.get(result.exit_status, "the terminal did not confirm the input")
                raise ShellError(reason)
            found: dict[str, Any] = json.loads(bytes(result.stdout).decode("utf-8"))
            if identity is None:  # not journaled: its files prove nothing to anyone
                files = " ".join(q(base + s) for s in (".taken", ".delivered"))
                await self.conn.run(f"rm -f -- {files}", check=False)
        except Exception as e:
            raise ShellError(f"the input was not delivered ({e})") from e
        return found

    async def _pull(self) -> None:
        if self.adopted is not None and self._marker:
            await self._pull_adopted()
            return
        if not isinstance(self._tail, _RemoteTail):
            return
        # the sentinel seen before the fetch: the file was complete when it was read
        seen = bool(self._marker) and self._marker in self._buf
        with contextlib.suppress(Exception):
            await self._tail.fetch()
            self._tail_complete = seen

    async def _pull_adopted(self) -> None:
        """An adopted command ends with its exit marker (no sentinel comes on a pipe)."""
        assert self.adopted is not None
        q = shlex.quote
        exit_file, pid = q(str(self.adopted.get("exit"))), int((self.relay or {}).get("pid", 0))
        look = f"cat {exit_file} 2>/dev/null && exit 0; kill -0 {pid} 2>/dev/null || exit 5; exit 3"
        try:
            found = await self.conn.run(look, check=False)
            if isinstance(self._tail, _RemoteTail):
                await self._tail.fetch()  # after the marker was seen: the output is whole
        except Exception:
            self._eof = True
            return
        if found.exit_status == 0:
            with contextlib.suppress(ValueError, TypeError):
                code = int(json.loads(str(found.stdout))["exit_code"])
                self._tail_complete = True
                self._buf += f"{self._marker}{code}\n"
                self._data.set()
        elif found.exit_status == 5:
            self._eof = True

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
