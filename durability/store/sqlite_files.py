"""SQLite maintenance on the journal's file: open it for maintenance, check it, back it up,
fold its WAL, swap it for a restore. What reads the journal's rows offline (verify,
retention, inspection) is durability/store/sqlite_scans.py.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from durability.synced import fsync_path

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


def column_names(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})").fetchall()}


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


fsync_file = fsync_dir = fsync_path  # a file's content; a folder's entries


def checkpoint_wal(path: Path) -> None:
    """Fold the WAL into the main file (TRUNCATE) so the file alone is complete."""
    conn = connect_readwrite(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def sidecars(path: Path) -> list[Path]:
    return [Path(str(path) + suffix) for suffix in ("-wal", "-shm", "-journal")]
