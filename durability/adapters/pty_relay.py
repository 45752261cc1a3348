"""The terminal relay: a small process that owns a pseudo-terminal and outlives the server.

Run as ``python pty_relay.py INBOX CWD`` (standard library only: it starts fast and imports
nothing of the project). It

1. opens a pseudo-terminal (no echo, no output translation) and starts ``bash --noprofile
   --norc /dev/fd/3`` on it: the terminal is the shell's (and each program's) standard
   input, output and error, and its controlling terminal; the commands come on fd 3;
2. forwards what it reads on its own standard input (the server's command lines) to fd 3,
   and what the terminal prints to its standard output (the server reads the sentinels);
3. delivers inputs: a file ``<call_id>.input`` that appears in INBOX (written elsewhere,
   then atomically renamed there) is claimed by renaming it to ``<call_id>.taken``, its
   bytes are written to the terminal, and then the delivery marker ``<call_id>.delivered``
   (sequence number, SHA-256 and length of the bytes) is written durably: temporary file,
   fsync, rename, fsync of the folder (durability/adapters/pty.py reads it back).

When the server goes away (its pipe ends) the relay closes fd 3, so the shell ends after
the command it runs, as a shell fed by the server's pipe would; until then the relay keeps
the terminal open and delivers inputs. It records itself in ``INBOX/relay.json`` (its pid,
the shell's pid) and removes that file when the shell has ended.

On an SSH host (python/helpers/ssh_shell.py) the same file runs with the host's python3:
``--announce`` prints the ``relay.json`` line on standard output before the terminal's
output (the server learns the pids without a round trip), and ``pty_relay.py --status
INBOX`` prints, as one JSON line, the relay recorded there, whether it still runs, and the
receipt-wrapped command it runs (``command.json``) with whether its exit marker exists.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import selectors
import signal
import sys
import termios
import time
from collections.abc import Mapping

POLL_SECONDS = 0.05  # how often the inbox is looked at
READ_CHUNK = 65536
RELAY_FILE = "relay.json"


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(folder: str, name: str, value: Mapping[str, object]) -> None:
    """``folder/name`` as one JSON line: temporary file, fsync, rename, fsync the folder."""
    path = os.path.join(folder, name)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, (json.dumps(value, separators=(",", ":")) + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync(folder)


def _quiet_terminal(fd: int) -> None:
    """No echo of typed bytes, no "\\n" -> "\\r\\n": what goes in and out stays as it is."""
    attrs = termios.tcgetattr(fd)
    attrs[1] &= ~termios.OPOST
    attrs[3] &= ~(termios.ECHO | termios.ECHONL)
    termios.tcsetattr(fd, termios.TCSANOW, attrs)


def _start_shell(cwd: str) -> tuple[int, int, int]:
    """(shell pid, terminal master fd, write end of the shell's command pipe)."""
    master, slave = os.openpty()
    _quiet_terminal(slave)
    commands_r, commands_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the shell
        try:
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            for target in (0, 1, 2):
                os.dup2(slave, target)
            os.dup2(commands_r, 3)
            os.closerange(4, 1024)
            os.chdir(cwd)
            os.execvp("bash", ["bash", "--noprofile", "--norc", "/dev/fd/3"])
        finally:
            os._exit(127)
    os.close(slave)
    os.close(commands_r)
    return pid, master, commands_w


class Relay:
    def __init__(self, inbox: str, cwd: str, announce: bool = False) -> None:
        self.announce = announce
        self.inbox = inbox
        self.cwd = cwd
        self.seq = 0
        self.server_gone = False
        self.commands_w: int | None = None

    def run(self) -> int:
        os.makedirs(self.inbox, mode=0o700, exist_ok=True)
        self.pid, self.master, self.commands_w = _start_shell(self.cwd)
        info = {"pid": os.getpid(), "shell_pid": self.pid, "started_at": time.time()}
        write_durably(self.inbox, RELAY_FILE, info)
        if self.announce:
            self._to_server((json.dumps(info, separators=(",", ":")) + "\n").encode())
        os.set_blocking(0, False)
        sel = selectors.DefaultSelector()
        sel.register(0, selectors.EVENT_READ, "server")
        sel.register(self.master, selectors.EVENT_READ, "terminal")
        status: int | None = None
        terminal_open = True
        while terminal_open or status is None:
            for key, _ in sel.select(POLL_SECONDS):
                if key.data == "server":
                    if not self._from_server():
                        sel.unregister(0)
                elif not self._from_terminal():
                    sel.unregister(self.master)
                    terminal_open = False
            self._deliver_all()
            if status is None:
                done, code = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    status = os.waitstatus_to_exitcode(code)
                    if terminal_open and not self._drain():
                        terminal_open = False
                    break
        self._forget()
        return 0 if status is None else max(status, 0)

    def _forget(self) -> None:
        """Remove ``relay.json`` when it still names this relay."""
        path = os.path.join(self.inbox, RELAY_FILE)
        try:
            with open(path, "rb") as f:
                mine = json.loads(f.read().decode("utf-8")).get("pid") == os.getpid()
            if mine:
                os.unlink(path)
        except (OSError, ValueError, AttributeError):
            pass

    def _from_server(self) -> bool:
        """Forward the server's command lines to the shell; False once the server is gone."""
        try:
            data = os.read(0, READ_CHUNK)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            self._server_left()
            return False
        if self.commands_w is not None:
            try:
                os.write(self.commands_w, data)
            except OSError:
                self._server_left()
        return True

    def _server_left(self) -> None:
        """The shell ends after what it runs now (no more commands can come)."""
        if self.commands_w is not None:
            with contextlib.suppress(OSError):
                os.close(self.commands_w)
            self.commands_w = None

    def _from_terminal(self) -> bool:
        try:
            data = os.read(self.master, READ_CHUNK)
        except OSError as exc:
            if exc.errno in (errno.EIO, errno.EBADF):
                return False
            raise
        if not data:
            return False
        self._to_server(data)
        return True

    def _drain(self) -> bool:
        """Read what the terminal still holds after the shell ended."""
        while True:
            try:
                os.set_blocking(self.master, False)
                data = os.read(self.master, READ_CHUNK)
            except (BlockingIOError, OSError):
                return False
            if not data:
                return False
            self._to_server(data)

    def _to_server(self, data: bytes) -> None:
        if self.server_gone:
            return
        try:
            view = memoryview(data)
            while view:
                written = os.write(1, view)
                view = view[written:]
        except BlockingIOError:
            time.sleep(0.01)
        except OSError:  # the server died: the terminal is drained, its output dropped
            self.server_gone = True

    # -- inputs ---------------------------------------------------------------
    def _deliver_all(self) -> None:
        try:
            names = sorted(n for n in os.listdir(self.inbox) if n.endswith(".input"))
        except OSError:
            return
        for name in names:
            self._deliver(name[: -len(".input")])

    def _deliver(self, call_id: str) -> None:
        handed = os.path.join(self.inbox, f"{call_id}.input")
        taken = os.path.join(self.inbox, f"{call_id}.taken")
        try:
            os.rename(handed, taken)  # claimed: from here on it may have been written
        except OSError:
            return  # voided by recovery, or gone
        _fsync(self.inbox)
        try:
            with open(taken, "rb") as f:
                header = json.loads(f.read().decode("utf-8"))
            data = base64.b64decode(header["data"], validate=True)
            sha = hashlib.sha256(data).hexdigest()
            if sha != header["sha256"]:
                raise ValueError("digest mismatch")
        except (OSError, ValueError, KeyError, TypeError):
            refused = {"call_id": call_id, "refused": "malformed_handover"}
            write_durably(self.inbox, f"{call_id}.refused", refused)
            return
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.master, view) :]
            except BlockingIOError:
                time.sleep(0.01)
        self.seq += 1
        marker: dict[str, object] = {
            "call_id": call_id,
            "args_digest": header.get("args_digest"),
            "seq": self.seq,
            "sha256": sha,
            "bytes": len(data),
            "delivered_at": time.time(),
        }
        write_durably(self.inbox, f"{call_id}.delivered", marker)


def _read(path: str) -> dict | None:
    try:
        with open(path, "rb") as f:
            value = json.loads(f.read(65536).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _is_relay(pid: object) -> bool:
    """``pid`` is a running relay (not a zombie, not a reused pid)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    names = {os.path.basename(arg) for arg in cmdline.split(b"\0")}
    return b"pty_relay.py" in names and state != b"Z"


def status(inbox: str) -> dict[str, object]:
    """The relay recorded in ``inbox``, whether it runs, and its command (``--status``)."""
    relay = _read(os.path.join(inbox, RELAY_FILE))
    command = _read(os.path.join(inbox, "command.json"))
    done = command is not None and os.path.exists(str(command.get("exit")))
    alive = relay is not None and _is_relay(relay.get("pid"))
    return {"relay": relay, "alive": alive, "command": command, "done": done}


def main(argv: list[str]) -> int:
    args = argv[1:]
    if len(args) == 2 and args[0] == "--status":
        sys.stdout.write(json.dumps(status(args[1])) + "\n")
        return 0
    announce = args[:1] == ["--announce"]
    args = args[1:] if announce else args
    if len(args) != 2:
        sys.stderr.write("usage: pty_relay.py [--announce] INBOX CWD | --status INBOX\n")
        return 2
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    return Relay(args[0], args[1], announce).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
