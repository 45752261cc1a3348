"""SQLite maintenance SQL: online backup, integrity check, file swap for restore.

Schema-aware pieces (retention deletes, checkpoint digests) live here too so that
durability/store/sqlite.py stays the engine's write path only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SQLITE_HEADER = b"SQLite format 3\x00"


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open an existing database without creating it or writing to it."""
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


def connect_readwrite(path: Path) -> sqlite3.Connection:
    """Open an existing database for maintenance writes (never creates a file)."""
    uri = Path(path).resolve().as_uri() + "?mode=rw"
    conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA secure_delete=ON")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


@contextlib.contextmanager
def readonly(path: Path) -> Iterator[sqlite3.Connection]:
    conn = connect_readonly(path)
    try:
        yield conn
    finally:
        conn.close()


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK when the block raises)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def schema_version(conn: sqlite3.Connection) -> int:
    """The journal schema's version (SQLite's user_version)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def runs_with_status(conn: sqlite3.Connection, statuses: Iterable[str]) -> list[tuple[str, float]]:
    """(id, updated_at) of every run in one of ``statuses``."""
    wanted = list(statuses)
    marks = ",".join("?" * len(wanted))
    rows = conn.execute(
        f"SELECT id, updated_at FROM runs WHERE status IN ({marks})", wanted
    ).fetchall()
    return [(str(r[0]), float(r[1])) for r in rows]


def has_sqlite_header(path: Path) -> bool:
    """True when the file starts with SQLite's 16-byte magic string."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_HEADER
    except OSError:
        return False


def integrity_problems(conn: sqlite3.Connection) -> list[str]:
    """Every problem `PRAGMA integrity_check` reports; empty when the file is sound."""
    rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
    return [] if rows == ["ok"] else rows


def foreign_key_problems(conn: sqlite3.Connection) -> list[str]:
    return [
        f"foreign key violation: table {r[0]} rowid {r[1]} refers to missing {r[2]}"
        for r in conn.execute("PRAGMA foreign_key_check").fetchall()
    ]


def table_names(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    return {str(r[0]) for r in rows}


def online_backup(source: Path, dest: Path) -> None:
    """Copy `source` into a new file `dest` through SQLite's backup API.

    The copy is consistent even while another process writes (the API restarts
    pages that change). `dest` is created with mode 0600 before SQLite opens it.
    """
    dest = Path(dest)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    src = connect_readonly(source)
    try:
        out = sqlite3.connect(str(dest), isolation_level=None)
        try:
            src.backup(out, pages=0)
            # A standalone file: no WAL sidecars for the copy.
            out.execute("PRAGMA journal_mode=DELETE")
        finally:
            out.close()
    except BaseException:
        with contextlib.suppress(OSError):
            dest.unlink()
        raise
    finally:
        src.close()
    os.chmod(dest, 0o600)
    fsync_file(dest)
    fsync_dir(dest.parent)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checkpoint_wal(path: Path) -> None:
    """Fold the WAL into the main file (TRUNCATE) so the file alone is complete."""
    conn = connect_readwrite(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def sidecars(path: Path) -> list[Path]:
    return [Path(str(path) + suffix) for suffix in ("-wal", "-shm", "-journal")]


# --- journal-aware maintenance (schema 0001) -------------------------------------------

CHECKPOINT_FORMAT = 1


@dataclass(frozen=True)
class CheckpointProblem:
    checkpoint_id: int
    run_id: str
    reason: str  # digest_mismatch, undecodable, unknown_format, blob_missing, ...


class _HistoryWalker:
    """Resolves history node chains through the blobs table, remembering what it saw."""

    def __init__(self, conn: sqlite3.Connection, check_digests: bool) -> None:
        self.conn = conn
        self.check_digests = check_digests
        self.seen_nodes: dict[str, list[str]] = {}  # node hash -> resolved message hashes
        self.reachable: set[str] = set()

    def blob(self, blob_hash: str) -> bytes | None:
        row = self.conn.execute("SELECT data FROM blobs WHERE hash = ?", (blob_hash,)).fetchone()
        return None if row is None else bytes(row[0])

    def resolve(self, head: str | None) -> list[str]:
        """Message hashes of the history whose head node is `head`; raises ValueError(reason)."""
        chain: list[tuple[str, dict[str, Any]]] = []
        current = head
        base_hashes: list[str] = []
        while current is not None:
            if current in self.seen_nodes:
                base_hashes = self.seen_nodes[current]
                break
            data = self.blob(current)
            if data is None:
                raise ValueError("blob_missing")
            if self.check_digests and hashlib.sha256(data).hexdigest() != current:
                raise ValueError("blob_digest_mismatch")
            try:
                node = json.loads(data)
                base, keep, add = node["base"], int(node["keep"]), [str(h) for h in node["add"]]
            except (ValueError, KeyError, TypeError):
                raise ValueError("undecodable_history_node") from None
            self.reachable.add(current)
            chain.append((current, {"keep": keep, "add": add}))
            current = base
            if len(chain) > 10_000_000:
                raise ValueError("history_chain_too_long")
        hashes = base_hashes
        for node_hash, node in reversed(chain):
            hashes = hashes[: node["keep"]] + node["add"]
            self.seen_nodes[node_hash] = hashes
        return hashes

    def messages_present(self, hashes: list[str]) -> str | None:
        """None when every message blob exists (and matches its hash); else the reason."""
        for h in hashes:
            if h in self.reachable:
                continue
            data = self.blob(h)
            if data is None:
                return "blob_missing"
            if self.check_digests and hashlib.sha256(data).hexdigest() != h:
                return "blob_digest_mismatch"
            self.reachable.add(h)
        return None


def _checkpoint_reason(walker: _HistoryWalker, body_text: str, digest: str) -> str | None:
    if hashlib.sha256(body_text.encode("utf-8")).hexdigest() != digest:
        return "digest_mismatch"
    try:
        body = json.loads(body_text)
    except ValueError:
        return "undecodable"
    if not isinstance(body, dict) or body.get("v") != CHECKPOINT_FORMAT:
        return "unknown_format"
    histories = body.get("histories")
    if not isinstance(histories, dict) or not isinstance(body.get("state"), dict):
        return "undecodable"
    for ref in histories.values():
        try:
            head, length = ref["head"], int(ref["length"])
            hashes = walker.resolve(head)
        except (KeyError, TypeError):
            return "undecodable"
        except ValueError as exc:
            return str(exc) if str(exc).isidentifier() else "undecodable"
        if len(hashes) != length:
            return "history_length_mismatch"
        reason = walker.messages_present(hashes)
        if reason:
            return reason
    return None


def checkpoint_problems(conn: sqlite3.Connection) -> tuple[int, list[CheckpointProblem]]:
    """Recompute every checkpoint's digest and resolve its histories; (checked, problems)."""
    walker = _HistoryWalker(conn, check_digests=True)
    problems: list[CheckpointProblem] = []
    checked = 0
    rows = conn.execute("SELECT id, run_id, body, digest FROM checkpoints ORDER BY id")
    for cp_id, run_id, body, digest in rows.fetchall():
        checked += 1
        try:
            reason = _checkpoint_reason(walker, str(body), str(digest))
        except UnicodeError:
            reason = "undecodable"
        if reason:
            problems.append(CheckpointProblem(int(cp_id), str(run_id), reason))
    return checked, problems


def blob_problems(conn: sqlite3.Connection) -> tuple[int, list[str]]:
    """(blobs checked, hashes of blobs whose bytes no longer match their content address)."""
    bad = []
    checked = 0
    for blob_hash, data in conn.execute("SELECT hash, data FROM blobs"):
        checked += 1
        if hashlib.sha256(bytes(data)).hexdigest() != blob_hash:
            bad.append(str(blob_hash))
    return checked, bad


def column_names(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})").fetchall()}


def _reachable_from(conn: sqlite3.Connection, where: str, args: list[str]) -> set[str]:
    """Blobs the selected checkpoints and calls reach: history nodes, messages, results."""
    walker = _HistoryWalker(conn, check_digests=False)
    rows = conn.execute(f"SELECT body FROM checkpoints {where}", args).fetchall()
    for (body,) in rows:
        try:
            histories = json.loads(body).get("histories", {})
        except (ValueError, AttributeError):
            continue
        for ref in histories.values() if isinstance(histories, dict) else ():
            try:
                walker.reachable.update(walker.resolve(ref["head"]))
            except (ValueError, KeyError, TypeError):
                head = ref.get("head") if isinstance(ref, dict) else None
                if isinstance(head, str):
                    walker.reachable.add(head)  # keep what a damaged chain still names
    rows = conn.execute(
        f"SELECT result_blob FROM calls {where or 'WHERE 1'} AND result_blob IS NOT NULL", args
    ).fetchall()
    walker.reachable.update(str(r[0]) for r in rows)
    return walker.reachable


def referenced_blobs(conn: sqlite3.Connection) -> set[str]:
    """Every blob a remaining checkpoint or call can reach."""
    return _reachable_from(conn, "", [])


def delete_runs_and_orphan_blobs(conn: sqlite3.Connection, run_ids: list[str]) -> tuple[int, int]:
    """Inside the caller's write transaction: delete finished runs (their inputs, calls,
    checkpoints, decisions, grants and events cascade), then the blobs those runs reached
    that no remaining checkpoint or call reaches. Blobs stored on their own (put_blob) are
    never candidates. Returns (runs removed, blobs removed).
    """
    candidates: set[str] = set()
    removed_runs = 0
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        chunk = [
            str(r[0])
            for r in conn.execute(
                f"SELECT id FROM runs WHERE id IN ({marks})"
                " AND status IN ('completed', 'stopped', 'failed')",
                chunk,
            ).fetchall()
        ]
        if not chunk:
            continue
        marks = ",".join("?" * len(chunk))
        candidates |= _reachable_from(conn, f"WHERE run_id IN ({marks})", chunk)
        cur = conn.execute(f"DELETE FROM runs WHERE id IN ({marks})", chunk)
        removed_runs += cur.rowcount
    if not candidates:
        return removed_runs, 0
    orphans = sorted(candidates - referenced_blobs(conn))
    removed_blobs = 0
    for start in range(0, len(orphans), 500):
        chunk = orphans[start : start + 500]
        cur = conn.execute(f"DELETE FROM blobs WHERE hash IN ({','.join('?' * len(chunk))})", chunk)
        removed_blobs += cur.rowcount
    return removed_runs, removed_blobs


def contexts_of_runs(conn: sqlite3.Connection, run_ids: list[str]) -> set[str]:
    """The chats these runs belong to."""
    found: set[str] = set()
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        rows = conn.execute(
            f"SELECT DISTINCT context_id FROM runs WHERE id IN ({','.join('?' * len(chunk))})",
            chunk,
        ).fetchall()
        found.update(str(r[0]) for r in rows)
    return found


def delete_emptied_contexts(conn: sqlite3.Connection, context_ids: set[str]) -> int:
    """Inside the caller's write transaction: of these chats, delete those left without any
    run, with their documents and conflicts (cascade) and their chat-level events. A chat
    whose every run was deleted is gone. Returns how many chats were deleted."""
    removed = 0
    ids = sorted(context_ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        empty = [
            str(r[0])
            for r in conn.execute(
                f"SELECT id FROM contexts WHERE id IN ({marks})"
                " AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.context_id = contexts.id)",
                chunk,
            ).fetchall()
        ]
        if not empty:
            continue
        marks = ",".join("?" * len(empty))
        conn.execute(f"DELETE FROM events WHERE context_id IN ({marks})", empty)
        removed += conn.execute(f"DELETE FROM contexts WHERE id IN ({marks})", empty).rowcount
    return removed


def checkpoint_metadata(conn: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """Id, position, digest, time and body size of each checkpoint of a run (no content)."""
    rows = conn.execute(
        "SELECT id, agent_seq, digest, created_at, size FROM ("
        " SELECT id, seq AS agent_seq, digest, created_at, length(CAST(body AS BLOB)) AS size"
        " FROM checkpoints WHERE run_id = ?) ORDER BY id",
        (run_id,),
    ).fetchall()
    return [
        {
            "id": r[0],
            "run_id": run_id,
            "seq": r[1],
            "digest": r[2],
            "created_at": r[3],
            "body_bytes": r[4],
        }
        for r in rows
    ]
