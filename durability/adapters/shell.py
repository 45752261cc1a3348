"""Shell receipts: the shell itself proves whether a command started and how it ended.

``ShellReceipts.wrap`` returns one line of bash that the session runs instead of plainly
sourcing the command's script. That line, executed by the shell (not by the agent):

1. creates ``<call_id>.out`` and writes the start marker ``<call_id>.start`` atomically
   (temporary file, ``sync FILE``, ``mv``, ``sync DIR``) *before* the command runs;
2. sources the script in the current shell (state such as cwd and variables persists) with
   stdout and stderr going to ``<call_id>.out`` only, never to the agent's pipe, so the
   command keeps running and finishing if the agent process dies;
3. writes the exit marker ``<call_id>.exit`` (exit code, SHA-256 and length of the output)
   the same atomic way, and leaves ``$?`` equal to the command's exit code.

``inspect`` reads the markers back into a ``ReceiptVerdict``; ``classify`` turns a journal
call into the recovery registry's classification. A receipt proves something only for the
call it names: the same call id, the same argument digest and well-formed files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from durability.adapters._local import pid_alive, read_json_object
from durability.adapters._wrapper import CALL_ID as _CALL_ID
from durability.adapters._wrapper import ReceiptError as ReceiptError
from durability.adapters._wrapper import ReceiptExists, wrap_command
from durability.adapters._wrapper import check_identity as _check_identity
from durability.canonical import digest, is_digest
from durability.errors import DurabilityError
from durability.records import Call
from durability.status import Policy, ReceiptOutcome
from durability.synced import fsync_path, write_synced

SHELL_POLICY: str = Policy.SHELL

NEVER_STARTED = "never_started"
COMPLETED = ReceiptOutcome.COMPLETED
UNKNOWN = ReceiptOutcome.UNKNOWN
REJECTED = ReceiptOutcome.REJECTED

#: Stable rejection reasons.
REASONS = (
    "invalid_call_id",
    "wrong_call_id",
    "wrong_args_digest",
    "malformed_receipt",
    "exit_without_start",
    "missing_output",
    "output_digest_mismatch",
    "malformed_args",  # classify/explain only: the call's args have no canonical digest
)

_MAX_MARKER_BYTES = 64 * 1024


def call_args_digest(masked_args: Any) -> str:
    """The argument digest a receipt names: SHA-256 of the call's canonical masked args."""
    return digest(masked_args)


@dataclass(frozen=True)
class ReceiptVerdict:
    """What the receipt files prove about one call."""

    status: str  # never_started | completed | unknown | rejected
    call_id: str
    reason: str | None = None  # set when rejected (one of REASONS)
    exit_code: int | None = None
    output: str | None = None  # the recorded output, when completed
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ShellReceipts:
    """A private folder (0700) of receipt files (0600), one set per call id."""

    def __init__(self, folder: Path) -> None:
        #: Called after a ``.remote`` pointer is written (call id, where): the server records
        #: the location in the journal too (durability/adapters/evidence.py).
        self.on_remote: Callable[[str, Mapping[str, Any]], None] | None = None
        self.folder = Path(folder)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)

    def __repr__(self) -> str:
        return f"ShellReceipts({str(self.folder)!r})"

    # -- paths ----------------------------------------------------------------
    def start_path(self, call_id: str) -> Path:
        return self.folder / f"{call_id}.start"

    def exit_path(self, call_id: str) -> Path:
        return self.folder / f"{call_id}.exit"

    def output_path(self, call_id: str) -> Path:
        return self.folder / f"{call_id}.out"

    def remote_path(self, call_id: str) -> Path:
        return self.folder / f"{call_id}.remote"

    # -- writing (done by the shell) ------------------------------------------
    def wrap(self, call_id: str, args_digest: str, script_path: Path) -> str:
        """One line of bash: start marker, the sourced script (output to file), exit marker."""
        _check_identity(call_id, args_digest)
        if self.start_path(call_id).exists() or self.exit_path(call_id).exists():
            raise ReceiptExists("a receipt for this call already exists", call_id=call_id)
        return wrap_command(str(self.folder), call_id, args_digest, str(script_path))

    def mark_started(self, call_id: str, args_digest: str) -> None:
        """Write only a start marker, from this process: for an effect that no shell wraps
        (text typed into a program that is already running). Without an exit marker a crash
        then classifies the call as ``unknown`` (held), never as ``never started``."""
        _check_identity(call_id, args_digest)
        if self.start_path(call_id).exists() or self.exit_path(call_id).exists():
            raise ReceiptExists("a receipt for this call already exists", call_id=call_id)
        marker = {
            "call_id": call_id,
            "args_digest": args_digest,
            "started_at": time.time(),
            "shell_pid": os.getpid(),
        }
        self._write_durably(self.start_path(call_id), marker)

    def mark_remote(self, call_id: str, args_digest: str, where: Mapping[str, Any]) -> None:
        """Record, before a command starts on another host, where its receipt will be.

        The pointer ``<call_id>.remote`` names the host and the remote folder; local
        ``inspect`` then never says "never started" for the call (it says ``unknown`` with
        ``detail.remote``), so only the SSH adapter (durability/adapters/ssh.py), which
        reads the remote markers, can prove more."""
        _check_identity(call_id, args_digest)
        existing = (self.start_path(call_id), self.exit_path(call_id), self.remote_path(call_id))
        if any(path.exists() for path in existing):
            raise ReceiptExists("a receipt for this call already exists", call_id=call_id)
        self._write_durably(
            self.remote_path(call_id),
            {"call_id": call_id, "args_digest": args_digest, **dict(where)},
        )
        if self.on_remote is not None:
            self.on_remote(call_id, where)

    def remote_pointer(self, call_id: str) -> dict[str, Any] | None:
        """The ``.remote`` pointer of a call (None when the call ran here or not at all)."""
        if not isinstance(call_id, str) or not _CALL_ID.match(call_id):
            return None
        return _read_marker(self.remote_path(call_id), {"call_id": str, "args_digest": str})

    def _write_durably(self, path: Path, value: Mapping[str, Any]) -> None:
        text = json.dumps(value, separators=(",", ":"))
        tmp = Path(f"{path}.tmp")
        write_synced(tmp, (text + "\n").encode("utf-8"))
        os.replace(tmp, path)
        fsync_path(self.folder)

    # -- reading --------------------------------------------------------------
    def inspect(self, call_id: str, args_digest: str) -> ReceiptVerdict:
        """What the files prove for this call id and argument digest."""
        if not isinstance(call_id, str) or not _CALL_ID.match(call_id):
            return ReceiptVerdict(REJECTED, str(call_id)[:128], reason="invalid_call_id")
        start_file, exit_file = self.start_path(call_id), self.exit_path(call_id)
        if not start_file.exists():
            if exit_file.exists():
                return _rejected(call_id, "exit_without_start")
            if self.remote_path(call_id).exists():  # ran on another host: only it can say
                pointer = self.remote_pointer(call_id)
                if pointer is None:
                    return _rejected(call_id, "malformed_receipt", marker="remote")
                return ReceiptVerdict(UNKNOWN, call_id, detail={"remote": pointer})
            return ReceiptVerdict(NEVER_STARTED, call_id)
        start = _read_marker(start_file, _START_FIELDS)
        if start is None:
            return _rejected(call_id, "malformed_receipt", marker="start")
        problem = _identity_problem(start, call_id, args_digest)
        if problem:
            return _rejected(call_id, problem, marker="start")
        detail: dict[str, Any] = {
            "started_at": start["started_at"],
            "shell_pid": start["shell_pid"],
            "output_file": str(self.output_path(call_id)),
        }
        if not exit_file.exists():
            detail["shell_alive"] = pid_alive(start["shell_pid"])
            return ReceiptVerdict(UNKNOWN, call_id, detail=detail)
        end = _read_marker(exit_file, _EXIT_FIELDS)
        if end is None or end["output_file"] != f"{call_id}.out" or end["output_bytes"] < 0:
            return _rejected(call_id, "malformed_receipt", marker="exit")
        problem = _identity_problem(end, call_id, args_digest)
        if problem:
            return _rejected(call_id, problem, marker="exit")
        detail["finished_at"] = end["finished_at"]
        try:
            with open(self.output_path(call_id), "rb") as f:
                data = f.read(end["output_bytes"])
        except FileNotFoundError:
            return _rejected(call_id, "missing_output")
        except OSError as exc:
            return _rejected(call_id, "missing_output", error=type(exc).__name__)
        if (
            len(data) != end["output_bytes"]
            or hashlib.sha256(data).hexdigest() != end["output_sha256"]
        ):
            return _rejected(call_id, "output_digest_mismatch")
        output = data.decode("utf-8", errors="replace")
        return ReceiptVerdict(
            COMPLETED, call_id, exit_code=end["exit_code"], output=output, detail=detail
        )

    def classify(self, call: Any) -> str | tuple[str, dict[str, Any]]:
        """Recovery registry entry (``durability.recovery.Adapter``) for ``adapter:shell``.

        Returns ``("completed", {"message", "output", "exit_code"})`` (``message`` is the
        tool result the receipt stands for), ``"not_started"``, ``"unknown"`` or
        ``"rejected:<reason>"``.
        """
        return classification_of(self.explain(call))

    def explain(self, call: Any) -> dict[str, Any]:
        """The same classification as a dict with details (for hold details and the UI)."""
        identity = call_identity(call)
        if isinstance(identity, dict):
            return identity
        return explain_verdict(self.inspect(*identity))

    def discard(self, call_id: str) -> None:
        """Remove one call's receipt files (after its result is committed, or by retention)."""
        if not isinstance(call_id, str) or not _CALL_ID.match(call_id):
            return
        for suffix in (
            ".start",
            ".exit",
            ".out",
            ".remote",
            ".start.tmp",
            ".exit.tmp",
            ".remote.tmp",
        ):
            with contextlib.suppress(FileNotFoundError):
                (self.folder / f"{call_id}{suffix}").unlink()

    def prune(self, needed: Callable[[str], bool]) -> int:
        """Discard the receipts of every call for which ``needed(call_id)`` is false.

        Run at start-up after recovery: receipts matter only while their call's run can
        still be recovered; returns how many calls' receipts were removed.
        """
        ids = {path.name.split(".", 1)[0] for path in self.folder.iterdir()}
        removed = 0
        for call_id in sorted(i for i in ids if _CALL_ID.match(i)):
            if not needed(call_id):
                self.discard(call_id)
                removed += 1
        return removed

    def clear(self) -> None:
        """Remove every receipt (tests and full resets only)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)


def call_identity(call: Any) -> tuple[str, str] | dict[str, Any]:
    """A call's (call id, argument digest), or the explanation of why it has none."""
    call_id, args = _call_fields(call)
    if call_id is None:
        return {"classification": "rejected:invalid_call_id", "reason": "invalid_call_id"}
    try:
        return call_id, call_args_digest(args)
    except DurabilityError:
        return {"classification": "rejected:malformed_args", "reason": "malformed_args"}


def explain_verdict(
    verdict: ReceiptVerdict, *, never_started_detail: bool = False
) -> dict[str, Any]:
    """A verdict in ``ShellReceipts.explain``'s shape (``<status>:<reason>`` when refused)."""
    if verdict.status == COMPLETED:
        return {
            "classification": ReceiptOutcome.COMPLETED,
            "exit_code": verdict.exit_code,
            "output": verdict.output,
            "message": completed_result_text(verdict.output or "", verdict.exit_code),
            "detail": verdict.detail,
        }
    if verdict.status == NEVER_STARTED:
        found: dict[str, Any] = {"classification": ReceiptOutcome.NOT_STARTED}
        if never_started_detail:
            found["detail"] = verdict.detail
        return found
    if verdict.status == UNKNOWN:
        return {"classification": ReceiptOutcome.UNKNOWN, "detail": verdict.detail}
    return {
        "classification": f"{verdict.status}:{verdict.reason}",
        "reason": verdict.reason,
        "detail": verdict.detail,
    }


def classification_of(found: dict[str, Any]) -> Any:
    """The recovery registry's classification of an ``explain`` result."""
    if found["classification"] == ReceiptOutcome.COMPLETED:
        keys = ("message", "output", "exit_code")
        return ReceiptOutcome.COMPLETED, {key: found[key] for key in keys}
    return found["classification"]


def completed_result_text(output: str, exit_code: int | None) -> str:
    """The tool result a completed receipt stands for (the code_execution_tool format)."""
    return f"{output or '(no output)'}\n[exit code {exit_code}]"


# -- helpers -------------------------------------------------------------------

_START_FIELDS: dict[str, type | tuple[type, ...]] = {
    "call_id": str,
    "args_digest": str,
    "started_at": (int, float),
    "shell_pid": int,
}
_EXIT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "call_id": str,
    "args_digest": str,
    "exit_code": int,
    "output_sha256": str,
    "output_bytes": int,
    "output_file": str,
    "finished_at": (int, float),
}


def _read_marker(path: Path, fields: dict[str, Any]) -> dict[str, Any] | None:
    value = read_json_object(path, _MAX_MARKER_BYTES)
    if value is None:
        return None
    for name, kind in fields.items():
        item = value.get(name)
        if not isinstance(item, kind) or isinstance(item, bool):
            return None
    if "output_sha256" in fields and not is_digest(value["output_sha256"]):
        return None
    return value


def _identity_problem(marker: dict[str, Any], call_id: str, args_digest: str) -> str | None:
    if marker["call_id"] != call_id:
        return "wrong_call_id"
    if marker["args_digest"] != args_digest:
        return "wrong_args_digest"
    return None


def _rejected(call_id: str, reason: str, **detail: Any) -> ReceiptVerdict:
    return ReceiptVerdict(REJECTED, call_id, reason=reason, detail=detail)


def _call_fields(call: Call | Mapping[str, Any]) -> tuple[str | None, Any]:
    if isinstance(call, Mapping):
        call_id = call.get("id", call.get("call_id"))
        args = call.get("args")
    else:
        call_id, args = call.id, call.args
    if not isinstance(call_id, str) or not _CALL_ID.match(call_id):
        return None, args
    return call_id, args
