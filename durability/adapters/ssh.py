"""SSH receipts: the same start, output and exit markers as local ones, on another host.

An SSH session (python/helpers/ssh_shell.py) runs each journaled command inside the wrapper
of ``durability.adapters._wrapper.wrap_command``, pointed at a private folder on the remote
host (``~/.a0-durable/receipts``, mode 0700). ``SshReceipts`` reads a call's markers back
over SSH and returns the verdicts of the local adapter (never started, completed with
output, unknown, rejected) plus one of its own: ``host_unreachable`` when the host cannot be
asked (network, authentication, a changed host key), which proves nothing and can be asked
again later.

``explain_delivery`` does the same for text typed into a terminal on the host (an ``input``
call, durability/adapters/pty.py): the relay there (pty_relay.py run by the host's python3)
keeps the inbox ``~/.a0-durable/pty/<key>``; an unclaimed handover is voided there by one
rename, the files are fetched, and the local reading gives delivered, not delivered or
``delivery_unknown``.

Host keys: ``known_hosts`` is a file under usr/ (``usr/ssh/known_hosts``). A host with no
entry is trusted on first use and recorded (``HostKeys.connect`` reports it); a host whose
key differs from the recorded one is refused (``SshHostKeyChanged``).
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import tempfile
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durability.adapters._wrapper import CALL_ID
from durability.adapters.pty import Delivery, TerminalInbox, explain_delivery, session_number
from durability.adapters.shell import (
    REJECTED,
    UNKNOWN,
    ReceiptVerdict,
    ShellReceipts,
    call_identity,
    classification_of,
    explain_verdict,
)
from durability.errors import DurabilityError
from durability.status import ReceiptOutcome
from durability.synced import write_synced

logger = logging.getLogger("a0.ssh")

#: The verdict when the host cannot be asked; recovery holds and asks again later.
HOST_UNREACHABLE = ReceiptOutcome.HOST_UNREACHABLE
#: The remote receipts folder, relative to the remote user's home.
REMOTE_RECEIPTS = ".a0-durable/receipts"
CONNECT_TIMEOUT = 10.0
MAX_FETCH_BYTES = 64 * 1024 * 1024


class SshError(DurabilityError):
    """The host cannot be used; ``code`` says why (stable)."""

    code = "ssh_connect_failed"


class SshUnavailable(SshError):
    code = "ssh_unavailable"  # the optional library (requirements-ssh.txt) is missing


class SshAuthFailed(SshError):
    code = "ssh_auth_failed"


class SshHostKeyChanged(SshError):
    code = "ssh_host_key_changed"


@dataclass(frozen=True)
class SshTarget:
    """Where commands run: host, port, user and how to log in (never logged: password)."""

    host: str
    port: int = 22
    user: str = "root"
    password: str = field(default="", repr=False)
    key_file: str = ""
    known_hosts: str = ""  # our file under usr/ (required: host keys are always checked)
    receipts: str = REMOTE_RECEIPTS

    def describe(self) -> dict[str, Any]:
        """What a ``.remote`` pointer and a hold detail may say (no secrets)."""
        return {"host": self.host, "port": self.port, "user": self.user, "folder": self.receipts}

    @property
    def host_pattern(self) -> str:
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


def _asyncssh() -> Any:
    try:
        import asyncssh
    except ImportError as exc:  # optional: pip install -r requirements-ssh.txt
        raise SshUnavailable("SSH needs asyncssh: pip install -r requirements-ssh.txt") from exc
    return asyncssh


@dataclass
class Connected:
    conn: Any
    first_use: str | None = None  # the recorded key line when the host was new


async def connect(target: SshTarget) -> Connected:
    """Open a connection with the host key checked against ``target.known_hosts``.

    Unknown host: the key is accepted and recorded (trust on first use, logged; the caller
    shows ``first_use``). Recorded host with another key: ``SshHostKeyChanged``."""
    asyncssh = _asyncssh()
    if not target.known_hosts:
        raise SshError("a known_hosts file is required")
    path = Path(target.known_hosts)
    known = _recorded(path, target.host_pattern)
    options: dict[str, Any] = {
        "host": target.host,
        "port": target.port,
        "username": target.user,
        "known_hosts": str(path) if known else None,
        "connect_timeout": CONNECT_TIMEOUT,
        "agent_path": None,
    }
    if target.key_file:
        options["client_keys"] = [target.key_file]
    if target.password:
        options["password"] = target.password
    try:
        conn = await asyncssh.connect(**options)
    except asyncssh.HostKeyNotVerifiable as exc:
        raise SshHostKeyChanged(
            f"the host key of {target.host_pattern} is not the one recorded in "
            f"{path}; refusing to run (remove its line there if the change is expected)"
        ) from exc
    except asyncssh.PermissionDenied as exc:
        raise SshAuthFailed(f"{target.user}@{target.host_pattern} refused the login") from exc
    except (OSError, TimeoutError, asyncssh.Error) as exc:
        raise SshError(f"cannot reach {target.host_pattern}: {type(exc).__name__}") from exc
    first_use = None
    if not known:
        key = conn.get_server_host_key()
        kind, blob = key.export_public_key().decode("ascii").split()[:2]
        first_use = f"{target.host_pattern} {kind} {blob}"
        _record(path, first_use)
        logger.warning("ssh: first use of %s, host key recorded: %s", target.host_pattern, kind)
    return Connected(conn, first_use)


def _recorded(path: Path, pattern: str) -> bool:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return False
    return any(line.split(" ", 1)[0].split(",").count(pattern) for line in lines if line)


def _record(path: Path, line: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_synced(path, (line + "\n").encode("ascii"), append=True)


async def remote_folder(conn: Any, folder: str) -> str:
    """Create the private receipts folder (0700) and return its absolute path."""
    quoted = folder if folder.startswith("/") else f'"$HOME"/{shlex.quote(folder)}'
    script = f"umask 077; mkdir -p {quoted} && chmod 700 {quoted} && cd {quoted} && pwd -P"
    result = await conn.run(script, check=False)
    if result.exit_status != 0:
        raise SshError(f"cannot create the remote receipts folder: {result.stderr!s:.200}")
    return str(result.stdout).strip()


class SshReceipts:
    """Reads the receipts of calls that ran over SSH (the recovery side's adapter)."""

    def __init__(
        self, target: SshTarget, connector: Callable[[SshTarget], Awaitable[Connected]] = connect
    ) -> None:
        self.target = target
        self._connect = connector

    async def inspect(self, call_id: str, args_digest: str) -> ReceiptVerdict:
        """The local adapter's verdict on the remote files, or ``host_unreachable``."""
        try:
            connected = await self._connect(self.target)
        except SshError as exc:
            return ReceiptVerdict(
                HOST_UNREACHABLE, call_id, reason=exc.code, detail={"error": str(exc)}
            )
        async with connected.conn as conn:
            try:
                return await self._inspect(conn, call_id, args_digest)
            except (OSError, SshError) as exc:
                reason = getattr(exc, "code", "ssh_connect_failed")
                return ReceiptVerdict(HOST_UNREACHABLE, call_id, reason=reason)

    async def _inspect(self, conn: Any, call_id: str, args_digest: str) -> ReceiptVerdict:
        if not isinstance(call_id, str) or not CALL_ID.match(call_id):
            return ReceiptVerdict(REJECTED, str(call_id)[:128], reason="invalid_call_id")
        folder = await remote_folder(conn, self.target.receipts)
        with tempfile.TemporaryDirectory(prefix="a0-ssh-receipt-") as tmp:
            local = ShellReceipts(Path(tmp))
            for suffix in (".start", ".exit", ".out"):
                data = await _fetch(conn, f"{folder}/{call_id}{suffix}")
                if data is not None:
                    path = local.folder / f"{call_id}{suffix}"
                    path.write_bytes(data)
            verdict = local.inspect(call_id, args_digest)
        detail = dict(verdict.detail)
        detail.update(self.target.describe())
        if verdict.status == UNKNOWN:
            pid = int(verdict.detail.get("shell_pid", 0))
            alive = await conn.run(f"kill -0 {pid}", check=False) if pid > 0 else None
            detail["shell_alive"] = alive is not None and alive.exit_status == 0
        if "output_file" in detail:
            detail["output_file"] = f"{folder}/{call_id}.out"
        return ReceiptVerdict(
            verdict.status,
            verdict.call_id,
            reason=verdict.reason,
            exit_code=verdict.exit_code,
            output=verdict.output,
            detail=detail,
        )

    async def explain_async(self, call: Any) -> dict[str, Any]:
        identity = call_identity(call)
        if isinstance(identity, dict):
            return identity
        return explain_verdict(await self.inspect(*identity), never_started_detail=True)

    def explain(self, call: Any) -> dict[str, Any]:
        """Synchronous ``explain_async`` (recovery adapters are plain callables)."""
        return _run_sync(self.explain_async(call))

    async def explain_delivery_async(self, call: Any, inbox: str) -> dict[str, Any]:
        """What the terminal inbox on the host proves for an ``input`` call (its unclaimed
        handover is voided first, so it can never be delivered after the verdict)."""
        identity = call_identity(call)
        if isinstance(identity, dict):
            return identity
        call_id, args_digest = identity
        try:
            connected = await self._connect(self.target)
        except SshError as exc:
            return _unreachable(exc.code, {"error": str(exc)})
        async with connected.conn as conn:
            try:
                found = await _read_inbox(conn, inbox, call_id, args_digest)
            except (OSError, SshError) as exc:
                return _unreachable(getattr(exc, "code", "ssh_connect_failed"), {})
        return explain_delivery(found, session_number(getattr(call, "args", None)))

    def explain_delivery(self, call: Any, inbox: str) -> dict[str, Any]:
        return _run_sync(self.explain_delivery_async(call, inbox))

    def classify(self, call: Any) -> str | tuple[str, dict[str, Any]]:
        """As ``ShellReceipts.classify``, plus ``"host_unreachable:<reason>"``."""
        found = classification_of(self.explain(call))
        return found if isinstance(found, tuple) else str(found)


def _unreachable(reason: str, detail: dict[str, Any]) -> dict[str, Any]:
    return {"classification": f"{HOST_UNREACHABLE}:{reason}", "reason": reason, "detail": detail}


async def _read_inbox(conn: Any, inbox: str, call_id: str, args_digest: str) -> Any:
    """Void an unclaimed handover on the host (one rename: the relay's claim or this), then
    read the inbox files back and judge them as a local inbox."""
    if not CALL_ID.match(call_id):
        return Delivery(REJECTED, str(call_id)[:128], reason="invalid_call_id")
    base = f"{inbox}/{call_id}"
    q = shlex.quote
    void = f"mv -- {q(base + '.input')} {q(base + '.void')} 2>/dev/null && sync -- {q(inbox)}"
    await conn.run(f"{void}; true", check=False)
    with tempfile.TemporaryDirectory(prefix="a0-ssh-inbox-") as tmp:
        local = TerminalInbox(Path(tmp))
        for suffix in (".delivered", ".taken", ".refused", ".input", ".void"):
            data = await _fetch(conn, base + suffix)
            if data is not None:
                local.path(call_id, suffix).write_bytes(data)
        return local.inspect(call_id, args_digest)


async def _fetch(conn: Any, path: str) -> bytes | None:
    """A remote file's bytes (None when it does not exist)."""
    q = shlex.quote(path)
    script = f"if [ -e {q} ]; then head -c {MAX_FETCH_BYTES} -- {q}; else exit 3; fi"
    result = await conn.run(script, check=False, encoding=None)
    if result.exit_status == 3:
        return None
    if result.exit_status != 0:
        raise SshError(f"cannot read {path} on the host")
    data = result.stdout
    return bytes(data) if data is not None else b""


def _run_sync(coro: Awaitable[Any]) -> Any:
    """Run a coroutine to its end from synchronous code, even inside a running loop."""
    box: dict[str, Any] = {}

    def runner() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=runner, name="a0-ssh-receipt", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
