"""Delivery receipts for text typed into a terminal (the ``input`` tool): ``adapter:pty``.

A local terminal session is owned by a relay process (durability/adapters/pty_relay.py)
that outlives the server. Its inbox, ``<receipts>/pty/<key>/`` (``terminal_dir``: one per
chat and session number), is where the server hands an input over and the relay proves its
delivery:

| file | written by | means |
| --- | --- | --- |
| ``<id>.input`` | the server (tmp file, fsync, rename, fsync dir) | handed over, unclaimed |
| ``<id>.taken`` | the relay renames ``.input`` to it | claimed: bytes may be written |
| ``<id>.delivered`` | the relay, after the bytes, durably | delivered (seq, SHA-256) |
| ``<id>.void`` | recovery renames an unclaimed ``.input`` | never delivered, never will be |

``inspect`` reads them back: ``delivered`` (a marker naming the call, its argument digest and
the digest of the bytes handed over) proves delivery; nothing handed over, or an unclaimed
handover that recovery voided (one rename wins: the relay's claim or recovery's void),
proves non-delivery; a claim without a marker proves nothing (``delivery_unknown``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from durability.adapters._local import read_json_object
from durability.adapters._wrapper import check_identity
from durability.canonical import is_digest
from durability.status import Policy, ReceiptOutcome
from durability.synced import fsync_path, write_synced

PTY_POLICY: str = Policy.PTY
PTY_FOLDER = "pty"
SUFFIXES = (".input", ".input.tmp", ".taken", ".delivered", ".delivered.tmp", ".void", ".refused")
_MAX_FILE_BYTES = 1024 * 1024


class DeliveryStatus(StrEnum):
    """What the files prove about one input (``Delivery.status``)."""

    DELIVERED = "delivered"
    NOT_DELIVERED = "not_delivered"
    UNKNOWN = "delivery_unknown"  # its terminal took it; no marker says it was delivered
    REJECTED = "rejected"  # the marker does not stand for this input


class DeliveryError(Exception):
    """The relay did not prove the delivery (it ended, refused the file or took too long)."""

    code = "input_not_delivered"


def terminal_dir(receipts_folder: Path, context_id: str, number: int) -> Path:
    """The inbox of a chat's terminal session ``number`` (stable across restarts)."""
    key = hashlib.sha256(f"{context_id}\0{number}".encode()).hexdigest()[:24]
    return Path(receipts_folder) / PTY_FOLDER / key


@dataclass(frozen=True)
class Delivery:
    """What the files prove about one input."""

    status: str  # a DeliveryStatus
    call_id: str
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class TerminalInbox:
    """One terminal's inbox folder (0700)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def path(self, call_id: str, suffix: str) -> Path:
        return self.folder / f"{call_id}{suffix}"

    def hand_over(self, call_id: str, args_digest: str, data: bytes) -> None:
        """Hand ``data`` to the relay: written and fsynced under a temporary name, then
        renamed into the inbox (the relay only ever sees a whole file)."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path(call_id, ".input.tmp")
        write_synced(tmp, handover_bytes(call_id, args_digest, data))
        os.replace(tmp, self.path(call_id, ".input"))
        fsync_path(self.folder)

    def delivered(self, call_id: str) -> dict[str, Any] | None:
        return _read_json_file(self.path(call_id, ".delivered"))

    def refused(self, call_id: str) -> bool:
        return self.path(call_id, ".refused").exists()

    def inspect(self, call_id: str, args_digest: str, *, void: bool = False) -> Delivery:
        """What the inbox proves for this call; ``void``: an unclaimed handover is voided
        first (recovery), so that it can never be delivered after the verdict."""
        if void:
            with contextlib.suppress(FileNotFoundError):
                os.rename(self.path(call_id, ".input"), self.path(call_id, ".void"))
                fsync_path(self.folder)
        taken = self.path(call_id, ".taken")
        marker_file = self.path(call_id, ".delivered")
        if marker_file.exists():
            marker, header = _read_json_file(marker_file), _read_json_file(taken)
            if marker is None or header is None:
                return Delivery(DeliveryStatus.REJECTED, call_id, reason="malformed_receipt")
            for found in (marker, header):
                if found.get("call_id") != call_id:
                    return Delivery(DeliveryStatus.REJECTED, call_id, reason="wrong_call_id")
                if found.get("args_digest") != args_digest:
                    return Delivery(DeliveryStatus.REJECTED, call_id, reason="wrong_args_digest")
            sha = marker.get("sha256")
            if not is_digest(sha) or sha != header.get("sha256") or sha != _payload_digest(header):
                return Delivery(DeliveryStatus.REJECTED, call_id, reason="delivery_digest_mismatch")
            keys = ("seq", "sha256", "bytes", "delivered_at")
            proven = {k: marker.get(k) for k in keys}
            return Delivery(DeliveryStatus.DELIVERED, call_id, detail=proven)
        if self.path(call_id, ".refused").exists():  # claimed, found malformed, not written
            return Delivery(DeliveryStatus.NOT_DELIVERED, call_id, detail={"refused": True})
        if taken.exists():
            return Delivery(DeliveryStatus.UNKNOWN, call_id, detail={"claimed": True})
        if self.path(call_id, ".input").exists():  # not voided: the relay may still claim it
            return Delivery(DeliveryStatus.UNKNOWN, call_id, detail={"claimed": False})
        voided = self.path(call_id, ".void").exists()
        return Delivery(DeliveryStatus.NOT_DELIVERED, call_id, detail={"handed_over": voided})

    def wait_delivered(self, call_id: str, relay_alive: Any, timeout: float) -> dict[str, Any]:
        """Block until the relay's marker for ``call_id`` is on disk (``relay_alive()``
        is asked while waiting); the marker, or ``DeliveryError``."""
        deadline = time.monotonic() + timeout
        while True:
            marker = self.delivered(call_id)
            if marker is not None:
                return marker
            if self.refused(call_id):
                raise DeliveryError("the terminal refused the input")
            if not relay_alive() or time.monotonic() > deadline:
                raise DeliveryError("the terminal did not confirm the input")
            time.sleep(0.02)

    def discard(self, call_id: str) -> None:
        for suffix in SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                self.path(call_id, suffix).unlink()


def handover_bytes(call_id: str, args_digest: str, data: bytes) -> bytes:
    """The content of a ``<call_id>.input`` file (one JSON line: identity, digest, bytes)."""
    check_identity(call_id, args_digest)
    header = {
        "call_id": call_id,
        "args_digest": args_digest,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "data": base64.b64encode(data).decode("ascii"),
    }
    return (json.dumps(header, separators=(",", ":")) + "\n").encode()


def delivered_message(number: Any, detail: dict[str, Any]) -> str:
    """The tool result a delivery marker stands for, after a restart."""
    sha = str(detail.get("sha256") or "")[:12]
    return (
        f"[input delivered to session {number} before the server restarted (delivery "
        f"receipt: input #{detail.get('seq')}, sha256 {sha}...). The output that followed "
        f"was not captured here: use code_execution_tool runtime 'output' to read more.]"
    )


def explain_delivery(found: Delivery, number: int) -> dict[str, Any]:
    """A delivery verdict in ``ShellReceipts.explain``'s shape (recovery, the panel)."""
    detail = {"session": number, **found.detail}
    if found.status == DeliveryStatus.DELIVERED:
        message = delivered_message(number, detail)
        return {
            "classification": ReceiptOutcome.COMPLETED,
            "message": message,
            "output": message,
            "exit_code": None,
            "detail": {"delivered": True, **detail},
        }
    if found.status == DeliveryStatus.NOT_DELIVERED:
        return {"classification": ReceiptOutcome.NOT_STARTED, "detail": detail}
    if found.status == DeliveryStatus.UNKNOWN:
        reason = DeliveryStatus.UNKNOWN
        classification = f"{ReceiptOutcome.UNKNOWN}:{reason}"
        return {"classification": classification, "reason": reason, "detail": detail}
    classification = f"{ReceiptOutcome.REJECTED}:{found.reason}"
    return {"classification": classification, "reason": found.reason, "detail": detail}


def session_number(args: Any) -> int:
    """The session an ``input`` call named (the tool's own reading of its arguments)."""
    inner = args.get("args") if isinstance(args, dict) else None
    value = inner.get("session", 0) if isinstance(inner, dict) else 0
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def prune_terminals(receipts_folder: Path, needed: Any) -> int:
    """Remove inbox files of calls nobody needs (``needed(call_id)`` false); empty inboxes
    of ended relays go too. Returns how many calls' files were removed."""
    root = Path(receipts_folder) / PTY_FOLDER
    removed = 0
    if not root.is_dir():
        return 0
    for folder in root.iterdir():
        if not folder.is_dir():
            continue
        inbox = TerminalInbox(folder)
        ids = {p.name.split(".", 1)[0] for p in folder.iterdir() if p.name != "relay.json"}
        for call_id in sorted(ids):
            if not needed(call_id):
                inbox.discard(call_id)
                removed += 1
        if not (folder / "relay.json").exists():  # no terminal left: nothing runs there
            with contextlib.suppress(OSError):
                (folder / "command.json").unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty (no relay, no evidence)
    return removed


def running_commands(receipts_folder: Path) -> set[str]:
    """Call ids of the commands that terminals still run (``command.json`` of a relay whose
    process is there): their receipts stay, a server that adopts the terminal reads them."""
    found = set()
    for folder in (Path(receipts_folder) / PTY_FOLDER).glob("*"):
        relay, command = (
            _read_json_file(folder / "relay.json"),
            _read_json_file(folder / "command.json"),
        )
        pid = (relay or {}).get("pid")
        if command is None or not isinstance(pid, int) or pid <= 0:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        if isinstance(command.get("call_id"), str):
            found.add(command["call_id"])
    return found


def _payload_digest(header: dict[str, Any]) -> str | None:
    try:
        return hashlib.sha256(base64.b64decode(header["data"], validate=True)).hexdigest()
    except (KeyError, TypeError, ValueError):
        return None


def _read_json_file(path: Path) -> dict[str, Any] | None:
    return read_json_object(path, _MAX_FILE_BYTES)
