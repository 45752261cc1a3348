"""The SQLite backend: one file, WAL, synchronous=FULL, one group-commit writer per process."""

from __future__ import annotations

import hashlib
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from durability.errors import (
    CorruptDatabase,
    DurabilityError,
    JournalClosed,
    StorageError,
)
from durability.store import sqlite_check
from durability.store._group_commit import Count, GroupCommitWriter
from durability.store.base import Store, StoreTx, numbered_migrations, pending_migrations
from durability.store.sqlite_tx import SqliteTx
from durability.store.sqlite_vectors import load_vector_extension

T = TypeVar("T")

MIGRATIONS_DIR = Path(__file__).parent / "migrations" / "sqlite"
BUSY_TIMEOUT_MS = 10_000
#: The page size of a new journal file (issue #24). A commit writes to the WAL one whole
#: page per B-tree page it touches (a run's row, each index entry, a blob): ~50 pages a
#: turn, most holding a row of a few hundred bytes. At 1 KiB a page, a turn writes about
#: half the bytes it wrote at SQLite's default 4 KiB (bench/bytes_bench.py). A file keeps
#: the size it was made with (an existing journal is not rewritten).
PAGE_SIZE = 1024
#: The WAL is folded back into the file once it holds this many bytes of pages (SQLite's
#: default is 1,000 pages, 4 MiB at 4 KiB): the same WAL size whatever the page size, so a
#: page rewritten by many commits of a cycle is copied back once.
WAL_AUTOCHECKPOINT_BYTES = 4 * 1024 * 1024


def migrations() -> list[tuple[int, Path]]:
    """Numbered migration files of this engine, in order."""
    return numbered_migrations(MIGRATIONS_DIR)


def translate_error(exc: BaseException) -> BaseException:
    """Turn sqlite3 errors into durability errors (messages carry no row values)."""
    if isinstance(exc, DurabilityError) or not isinstance(exc, sqlite3.Error):
        return exc
    text = str(exc)
    if isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text):
        return CorruptDatabase("the journal database is damaged", reason=text)
    if "locked" in text or "busy" in text:
        return StorageError("the journal database is busy", reason=text)
    if isinstance(exc, sqlite3.IntegrityError):
        return StorageError("the journal refused a write (constraint)", reason=text)
    return StorageError("the journal database failed", reason=text)


def _sha256_text(text: str | None) -> str | None:
    """SHA-256 of a text column's UTF-8 bytes (for migrations that add digests)."""
    return None if text is None else hashlib.sha256(str(text).encode("utf-8")).hexdigest()


def _prepare_private_file(path: Path) -> None:
    """Create the folder 0700 and the database file 0600 before SQLite touches them."""
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
        os.chmod(path.parent, 0o700)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        os.close(fd)
        os.chmod(path, 0o600)


class _SqliteControl:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def savepoint(self) -> None:
        self.conn.execute("SAVEPOINT call")

    def release(self) -> None:
        self.conn.execute("RELEASE call")

    def rollback_to_savepoint(self) -> None:
        self.conn.execute("ROLLBACK TO call")
        self.conn.execute("RELEASE call")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")


class SqliteStore(Store):
    engine = "sqlite"
    native_async_writes = True

    def __init__(self, path: str | os.PathLike[str], *, quick_check: bool = True) -> None:
        self.path = Path(path)
        _prepare_private_file(self.path)
        self._readers: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        self.memory_search_backend = "sqlite-vec"
        self.memory_search_problem = ""
        conn: sqlite3.Connection | None = None
        try:
            conn = self._connect()
            if conn.execute("PRAGMA page_count").fetchone()[0] == 0:  # a new file
                conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StorageError("could not switch the journal to WAL", reason=str(mode))
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            pages = max(1, WAL_AUTOCHECKPOINT_BYTES // int(page_size))
            conn.execute(f"PRAGMA wal_autocheckpoint={pages}")
            if quick_check and not sqlite_check.passed(self.path):  # begun at process start?
                problems = self._check(conn, full=False)
                if problems:
                    raise CorruptDatabase(
                        "the journal database failed its quick check", problems=problems[:10]
                    )
            self._migrate(conn)
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise translate_error(exc) from None
            raise
        self._writer_conn = conn
        self._writer = GroupCommitWriter(
            _SqliteControl(conn), SqliteTx(conn), translate_error, name=f"journal-writer:{path}"
        )

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        problem = load_vector_extension(conn)
        if problem and not self.memory_search_problem:
            self.memory_search_backend, self.memory_search_problem = "unavailable", problem
        return conn

    @staticmethod
    def _check(conn: sqlite3.Connection, full: bool) -> list[str]:
        pragma = "integrity_check" if full else "quick_check"
        rows = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}").fetchall()]
        return [] if rows == ["ok"] else rows

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        conn.create_function("a0_sha256", 1, _sha256_text, deterministic=True)
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        for number, path in pending_migrations(MIGRATIONS_DIR, current):
            script = path.read_text(encoding="utf-8")
            try:
                conn.executescript(
                    f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version={number};\nCOMMIT;"
                )
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @property
    def schema_version(self) -> int:
        return self.read_raw(lambda c: c.execute("PRAGMA user_version").fetchone()[0])

    batches = Count("_writer", "batches", "Write transactions this process's writer committed.")

    def write(self, fn: Callable[[StoreTx], T]) -> T:
        return self._writer.submit(fn)

    deferred_writes = True

    @property  # type: ignore[override]
    def defer_seconds(self) -> float:
        return self._writer.defer_seconds

    @defer_seconds.setter
    def defer_seconds(self, seconds: float) -> None:
        self._writer.defer_seconds = seconds

    def defer(self, *args: Any, **kwargs: Any) -> None:  # Store.defer's parameters
        self._writer.defer(*args, **kwargs)

    def flush(self) -> None:
        self._writer.flush()

    async def flush_async(self) -> None:
        await self._writer.flush_async()

    unsettled = Count("_writer", "unsettled", "Deferred writes handed over, not answered yet.")
    deferred_alone = Count(
        "_writer",
        "deferred_alone",
        "Deferred writes that committed on their own (none to ride on).",
    )

    async def write_async(self, fn: Callable[[StoreTx], T]) -> T:
        return await self._writer.submit_async(fn)

    def _acquire_reader(self) -> sqlite3.Connection:
        if self._closed:
            raise JournalClosed("the journal is closed")
        try:
            return self._readers.get_nowait()
        except queue.Empty:
            conn = self._connect()
            with self._readers_lock:
                self._all_readers.append(conn)
            return conn

    def read_raw(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._acquire_reader()
        try:
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate_error(exc) from None
        finally:
            self._readers.put(conn)

    def read(self, fn: Callable[[StoreTx], T]) -> T:
        return self.read_raw(lambda conn: fn(SqliteTx(conn)))

    def integrity_check(self, full: bool = False) -> list[str]:
        return self.read_raw(lambda conn: self._check(conn, full))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writer.close()
        self._writer_conn.close()
        with self._readers_lock:
            for conn in self._all_readers:
                conn.close()
            self._all_readers.clear()
