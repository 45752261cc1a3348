"""Shared resources: a run's attachments and a chat's work folder, moved between workers
through the journal, encrypted (durability/crypto.py), restored only into a new private
directory.

- **Capture.** ``snapshot_folder`` walks a folder without following links: regular files
  are taken; links (symbolic, or files with several hard links) and special files are
  *refused* (listed in the snapshot, never read). Each file is stored once under its keyed
  content address (equal bytes are never stored twice); a file whose size and mtime
  match the previous snapshot keeps its address without being read again, and only
  bodies not yet stored are encrypted and sent. The manifest (names, sizes, modes,
  addresses) is encrypted too. A snapshot larger than ``max_bytes`` is refused whole.
- **Attachments.** ``store_attachments`` takes names and bytes: any name that is not a
  plain relative path refuses the whole call (nothing stored).
- **Restore.** ``restore(snapshot_id, into)`` creates ``into`` (which must not exist, mode
  0700) and writes the files below it, directories 0700, files 0600 (0700 when they were
  executable). Every name is checked before anything is created, every path is opened
  relative to its directory without following links, and nothing is ever written into
  an existing folder: a merge is never possible.

Shared resources exist only on PostgreSQL (shared workers); with SQLite files stay on
their host. A work-folder snapshot of a run is a write of that run: with shared workers
it is fenced by the worker's claim like every journal write.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durability.crypto import ResourceCipher
from durability.errors import (
    InvalidArgument,
    ResourceNotFound,
    ResourceRefused,
    ResourceTooLarge,
    ResourceUndecryptable,
)
from durability.resource_files import check_name, check_tree, read_regular, write_tree
from durability.store.base import StoreTx
from durability.store.rows import SnapshotRow

KINDS = ("attachments", "workdir", "browser_profile")
FOLDER_KINDS = ("workdir", "browser_profile")  # captured by snapshot_folder
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class Entry:
    path: str  # relative, "/"-separated, checked by check_name
    size: int
    mode: int  # 0o600 or 0o700
    address: str
    mtime_ns: int = 0


@dataclass(frozen=True)
class Snapshot:
    id: int
    context_id: str
    run_id: str | None
    kind: str
    entries: list[Entry]
    total_size: int
    created_at: float
    refused: list[dict[str, str]] = field(default_factory=list)  # {"path", "reason"}
    stored: int = 0  # file bodies this capture added (the rest were already stored)


class SharedResources:
    """Encrypted resources in a PostgreSQL journal (``journal.store`` a PostgresStore)."""

    def __init__(
        self,
        journal: Any,  # a Journal on PostgreSQL (its store's engine-specific calls)
        cipher: ResourceCipher,
        *,
        max_bytes: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if journal.store.engine != "postgres":
            raise InvalidArgument("shared resources need the PostgreSQL journal", field="journal")
        self.journal = journal
        self.store = journal.store
        self.cipher = cipher
        self.max_bytes = int(max_bytes)
        self._clock = clock

    # capture
    def store_attachments(
        self, context_id: str, run_id: str | None, files: Mapping[str, bytes]
    ) -> Snapshot:
        """Store a message's attachments (name -> bytes); one bad name refuses them all."""
        names = list(files)
        for name in names:
            check_name(name)
        check_tree(names)
        total = sum(len(files[n]) for n in names)
        self._check_size(total)
        entries = []
        bodies: dict[str, bytes] = {}
        for name in sorted(names):
            data = bytes(files[name])
            address = self.cipher.address(data)
            bodies[address] = data
            entries.append(Entry(name, len(data), 0o600, address))
        return self._save(context_id, run_id, "attachments", entries, bodies, [], fenced=False)

    def snapshot_folder(
        self,
        folder: str | os.PathLike[str],
        *,
        context_id: str,
        run_id: str | None = None,
        previous: Snapshot | None = None,
        kind: str = "workdir",
    ) -> Snapshot:
        """Capture a work folder (see the module doc); ``previous`` lets unchanged files
        (same size and mtime) keep their address without being read. ``kind``: ``workdir``
        or ``browser_profile`` (a chat's browser profile folder)."""
        if kind not in FOLDER_KINDS:
            raise InvalidArgument(f"kind must be one of {', '.join(FOLDER_KINDS)}", field="kind")
        root = Path(folder)
        info = os.lstat(root)
        if not stat.S_ISDIR(info.st_mode):
            raise ResourceRefused(
                "the work folder is not a folder", path=root.name, reason="not_a_folder"
            )
        known = {e.path: e for e in previous.entries} if previous is not None else {}
        found: list[tuple[str, os.stat_result]] = []
        refused: list[dict[str, str]] = []
        self._walk(root, "", found, refused)
        total = sum(st.st_size for _, st in found)
        self._check_size(total)
        entries, bodies = [], {}
        for rel, st in found:
            mode = 0o700 if st.st_mode & stat.S_IXUSR else 0o600
            old = known.get(rel)
            if old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
                entries.append(Entry(rel, old.size, mode, old.address, old.mtime_ns))
                continue
            data = read_regular(root, rel)
            if data is None:  # replaced by a link or a special file meanwhile
                refused.append({"path": rel, "reason": "changed_type"})
                continue
            address = self.cipher.address(data)
            bodies[address] = data
            entries.append(Entry(rel, len(data), mode, address, st.st_mtime_ns))
        total = sum(e.size for e in entries)
        self._check_size(total)
        return self._save(
            context_id, run_id, kind, entries, bodies, refused, fenced=run_id is not None
        )

    def _walk(
        self,
        root: Path,
        prefix: str,
        found: list[tuple[str, os.stat_result]],
        refused: list[dict[str, str]],
    ) -> None:
        with os.scandir(root / prefix if prefix else root) as it:
            items = sorted(it, key=lambda e: e.name)
        for item in items:
            rel = f"{prefix}/{item.name}" if prefix else item.name
            try:
                check_name(rel)
            except ResourceRefused as exc:
                refused.append({"path": rel[:200], "reason": str(exc.reason)})
                continue
            st = item.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                refused.append({"path": rel, "reason": "link"})
            elif stat.S_ISDIR(st.st_mode):
                self._walk(root, rel, found, refused)
            elif not stat.S_ISREG(st.st_mode):
                refused.append({"path": rel, "reason": "special_file"})
            elif st.st_nlink > 1:
                refused.append({"path": rel, "reason": "hard_link"})
            else:
                found.append((rel, st))

    def _check_size(self, total: int) -> None:
        if total > self.max_bytes:
            raise ResourceTooLarge(
                "the resources exceed the size limit", limit=self.max_bytes, size=total
            )

    def _save(
        self,
        context_id: str,
        run_id: str | None,
        kind: str,
        entries: list[Entry],
        bodies: dict[str, bytes],
        refused: list[dict[str, str]],
        *,
        fenced: bool,
    ) -> Snapshot:
        manifest = json.dumps(
            {"v": MANIFEST_VERSION, "entries": [e.__dict__ for e in entries]},
            sort_keys=True,
            separators=(",", ":"),
        ).encode("utf-8")
        sealed_manifest = self.cipher.encrypt(manifest)
        total = sum(e.size for e in entries)
        now = self._clock()
        present = self.store.read(lambda tx: tx.resources.existing_addresses(list(bodies)))
        sealed = {a: self.cipher.encrypt(d) for a, d in bodies.items() if a not in present}
        cluster = self.journal.cluster if fenced else None

        pinned: list[int] = []  # a repeat (after a lost connection) carries the first token

        def save_resources(tx: StoreTx) -> int:
            if cluster is not None and run_id is not None:
                held = pinned[0] if pinned else None
                token = cluster.check_fence(tx, run_id=run_id, pinned=held)
                if token is not None and not pinned:
                    pinned.append(token)
            for address, token in sealed.items():
                tx.resources.insert_file(address, len(bodies[address]), token, now)
            return tx.resources.insert_snapshot(
                context_id, run_id, kind, sealed_manifest, total, now
            )

        snapshot_id = self.store.write(save_resources)
        return Snapshot(
            snapshot_id, context_id, run_id, kind, entries, total, now, refused, len(sealed)
        )

    # read back
    def _snapshot(self, row: SnapshotRow | None) -> Snapshot | None:
        if row is None:
            return None
        try:
            body = json.loads(self.cipher.decrypt(row.manifest))
            entries = [Entry(**e) for e in body["entries"]]
            for e in entries:
                if not (
                    isinstance(e.path, str)
                    and isinstance(e.address, str)
                    and type(e.size) is int
                    and type(e.mode) is int
                ):
                    raise TypeError("entry field types")
        except ResourceUndecryptable:
            raise
        except (ValueError, KeyError, TypeError):
            raise ResourceUndecryptable(
                "a resource manifest is malformed", snapshot_id=row.id
            ) from None
        return Snapshot(
            int(row.id),
            row.context_id,
            row.run_id,
            row.kind,
            entries,
            int(row.total_size),
            float(row.created_at),
        )

    def get(self, snapshot_id: int) -> Snapshot:
        found = self._snapshot(self.store.read(lambda tx: tx.resources.get_snapshot(snapshot_id)))
        if found is None:
            raise ResourceNotFound("no such resource snapshot", snapshot_id=snapshot_id)
        return found

    def latest(self, context_id: str, kind: str, *, run_id: str | None = None) -> Snapshot | None:
        """The newest snapshot of a chat (or of one run) of ``kind``."""
        if kind not in KINDS:
            raise InvalidArgument(f"kind must be one of {', '.join(KINDS)}", field="kind")
        return self._snapshot(
            self.store.read(lambda tx: tx.resources.latest_snapshot(context_id, kind, run_id))
        )

    # restore
    def restore(self, snapshot_id: int, into: str | os.PathLike[str]) -> Path:
        """Write the snapshot's files into the NEW private directory ``into`` (see the
        module doc); returns it. Nothing is written when any name is refused."""
        snapshot = self.get(snapshot_id)
        for entry in snapshot.entries:
            check_name(entry.path)
        check_tree([e.path for e in snapshot.entries])
        addresses = sorted({e.address for e in snapshot.entries})
        sealed = self.store.read(lambda tx: tx.resources.get_files(addresses))
        plain: dict[str, bytes] = {}
        for address in addresses:
            if address not in sealed:
                raise ResourceUndecryptable("a resource file is missing", address=address)
            data = self.cipher.decrypt(sealed[address])
            if not self.cipher.matches(data, address):
                raise ResourceUndecryptable(
                    "a resource file does not match its address", address=address
                )
            plain[address] = data
        target = Path(into)
        try:
            os.mkdir(target, 0o700)
        except FileExistsError:
            raise ResourceRefused(
                "resources are restored only into a new folder", path=target.name, reason="exists"
            ) from None
        os.chmod(target, 0o700)
        try:
            write_tree(target, [(e.path, e.mode, plain[e.address]) for e in snapshot.entries])
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        return target
