"""The storage interface. Policy lives in durability/journal/; a backend only stores rows
and turns its database's errors into durability errors.

A backend offers transactions through ``write(fn)`` and ``read(fn)``: ``fn`` receives a
``StoreTx`` and runs inside one transaction. ``write`` returns only once that transaction is
durable; a ``DurabilityError`` raised by ``fn`` rolls back ``fn``'s own writes (unless the
error ``keeps_writes``) and is re-raised to the caller after the commit.
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

from durability.errors import SchemaTooNew
from durability.store._sql import Sql
from durability.store._tables.blobs import BlobTable
from durability.store._tables.calls import CallTable
from durability.store._tables.checkpoints import CheckpointTable
from durability.store._tables.claims import ClaimTable
from durability.store._tables.decisions import DecisionTable, GrantTable, StandingGrantTable
from durability.store._tables.documents import ConflictTable, DocumentTable
from durability.store._tables.events import EventTable
from durability.store._tables.knowledge import KnowledgeFileTable, MemoryModelTable
from durability.store._tables.memories import EmbeddingCacheTable, MemoryTable
from durability.store._tables.resources import ResourceTable
from durability.store._tables.runs import ContextTable, InputTable, RunTable
from durability.store._tables.tasks import TaskTable
from durability.store._tables.web_sessions import WebSessionTable

T = TypeVar("T")


class _table(Generic[T]):
    """A table of ``StoreTx`` built with the transaction's ``sql`` on first use, then kept
    (as ``cached_property`` would; the engine-dependent tables are written out below)."""

    def __init__(self, build: Callable[[Sql], T]) -> None:
        self.build = build

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, tx: StoreTx, owner: type | None = None) -> T:
        table = self.build(tx.sql)
        tx.__dict__[self.name] = table
        return table


class StoreTx:
    """One transaction: an object per table, built with the engine's dialect on first use.

    ``tx.runs.get(run_id)``, ``tx.calls.insert(call)``, ...: each table object
    (durability/store/_tables/) holds its SQL for both engines; an engine's StoreTx
    (durability/store/sqlite_tx.py, durability/store/postgres_tx.py) gives the dialect and
    swaps in a table class only where its statements differ. Values are already masked.
    Stored JSON is decoded with ``durability.integrity.load_json``: damage comes back as an
    ``Undecodable`` marker, never as an error; the journal checks every digest.
    """

    Runs: type[RunTable] = RunTable
    Calls: type[CallTable] = CallTable
    Memories: type[MemoryTable] = MemoryTable
    #: the claims of shared workers: only an engine with claims has them
    Claims: type[ClaimTable] | None = None
    #: shared resources (durability/resources.py): only an engine that stores them
    Resources: type[ResourceTable] | None = None

    def __init__(self, sql: Sql) -> None:
        self.sql = sql

    contexts = _table(ContextTable)
    inputs = _table(InputTable)
    blobs = _table(BlobTable)
    checkpoints = _table(CheckpointTable)
    documents = _table(DocumentTable)
    conflicts = _table(ConflictTable)
    decisions = _table(DecisionTable)
    grants = _table(GrantTable)
    standing = _table(StandingGrantTable)
    events = _table(EventTable)
    tasks = _table(TaskTable)
    web_sessions = _table(WebSessionTable)
    embedding_cache = _table(EmbeddingCacheTable)
    knowledge_files = _table(KnowledgeFileTable)
    memory_models = _table(MemoryModelTable)

    # the tables whose class is the engine's
    @cached_property
    def runs(self) -> RunTable:
        return self.Runs(self.sql)

    @cached_property
    def calls(self) -> CallTable:
        return self.Calls(self.sql, self.runs, self.blobs)

    @cached_property
    def memories(self) -> MemoryTable:
        return self.Memories(self.sql)

    @cached_property
    def claims(self) -> ClaimTable:
        if self.Claims is None:
            raise NotImplementedError(f"{type(self).__name__} has no claims")
        return self.Claims(self.sql)

    @cached_property
    def resources(self) -> ResourceTable:
        if self.Resources is None:
            raise NotImplementedError(f"{type(self).__name__} stores no shared resources")
        return self.Resources(self.sql)


class FencedOp(Generic[T]):
    """A shared worker's write behind its fence (durability/cluster.py): ``op`` runs only
    after ``verify`` accepted the run's current token, read with the run's row locked
    (``found``: the run id and its token, or None when there is no such run or call).
    Called with a transaction, it locks and verifies the fence itself; PostgreSQL instead
    reads the fence in the round trip that opens the transaction, then calls ``verify``
    and ``op`` (durability/store/postgres.py)."""

    def __init__(
        self,
        op: Callable[[StoreTx], T],
        run_id: str | None,
        call_id: str | None,
        verify: Callable[[tuple[str, int | None] | None], object],
    ) -> None:
        self.op, self.run_id, self.call_id, self.verify = op, run_id, call_id, verify
        #: ``op`` opens with a hot-path write (``hot_path``): the fence may ride with it
        self.hot_path: bool = getattr(op, "opens_with_hot_path", False)
        self.__qualname__ = getattr(op, "__qualname__", type(op).__name__)

    def __call__(self, tx: StoreTx) -> T:
        self.verify(tx.claims.lock_fence(run_id=self.run_id, call_id=self.call_id))
        return self.op(tx)


def hot_path(op: Callable[[StoreTx], T]) -> Callable[[StoreTx], T]:
    """Mark a write whose first statement is a hot-path write of the calls table
    (``insert_if_free``, ``close_open``), run at once: PostgreSQL then reads its fence with
    that statement (postgres_tx.py, ``Opened``), not with a statement of its own before
    ``op`` runs. Other engines ignore the mark."""
    op.opens_with_hot_path = True  # type: ignore[attr-defined]
    return op


class Store(ABC):
    """A journal backend: transactions, integrity checks, lifecycle."""

    engine: str = "abstract"
    #: True when ``write_async`` hands the transaction to the engine without a thread per
    #: call (the journal's async facade then prepares writes on the event loop).
    native_async_writes: bool = False
    #: True when ``defer`` hands a write over without waiting for its commit.
    deferred_writes: bool = False
    #: Longest a deferred write waits for a write to ride on (engines that defer).
    defer_seconds: float = 0.0
    #: How memory search runs on this store (durability/memory.py): ``sqlite-vec``,
    #: ``pgvector``, ``exact`` (numpy on the worker) or ``unavailable``; set at open.
    memory_search_backend: str = "exact"
    #: Why the preferred search cannot run (empty when it can).
    memory_search_problem: str = ""

    def defer(
        self,
        fn: Callable[[StoreTx], Any],
        on_done: Callable[[Any, Any], None],
        within: float | None = None,
    ) -> None:
        """Commit ``fn`` with the next write, or on its own within ``within`` seconds
        (None: ``defer_seconds``); ``on_done(value, error)`` gets the outcome
        (durability/journal/_deferral.py)."""
        raise NotImplementedError(f"{type(self).__name__} does not defer writes")

    def flush(self) -> None:
        """Return once every deferred write handed over so far is answered."""
        return None  # an engine that does not defer has nothing to wait for

    async def flush_async(self) -> None:
        """``flush`` for code on an event loop."""
        return None

    @abstractmethod
    def write(self, fn: Callable[[StoreTx], T]) -> T:
        """Run ``fn`` in a write transaction; return once it is durable (group commit).

        ``fn`` may be run more than once (a backend runs it again from the start after a
        conflict, or to isolate a refused write of a batch): it reads and writes only
        through its ``tx`` and resets whatever it collects."""

    async def write_async(self, fn: Callable[[StoreTx], T]) -> T:
        """``write`` for code on an event loop (by default in a worker thread)."""
        return await asyncio.to_thread(self.write, fn)

    @abstractmethod
    def read(self, fn: Callable[[StoreTx], T]) -> T:
        """Run ``fn`` against one consistent snapshot."""

    @abstractmethod
    def integrity_check(self, full: bool = False) -> list[str]:
        """Problems found (empty when healthy). ``full`` runs the slow, thorough check."""

    @abstractmethod
    def close(self) -> None: ...


def operation_name(fn: Callable[..., object]) -> str:
    """The journal operation a transaction function belongs to, for log lines:
    ``commit_result.<locals>.op`` (or ``CallOps.commit_result.<locals>.op``) gives
    ``commit_result``; a private helper ``_admit`` gives ``admit``."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return name.split(".<locals>", 1)[0].rsplit(".", 1)[-1].lstrip("_") or name


_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def numbered_migrations(folder: Path) -> list[tuple[int, Path]]:
    """An engine's numbered migration files (``NNNN_name.sql`` in ``folder``), in order."""
    found = []
    for path in folder.iterdir():
        match = _MIGRATION_NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def pending_migrations(folder: Path, current: int) -> list[tuple[int, Path]]:
    """The migrations in ``folder`` past schema ``current``; ``schema_too_new`` when the
    journal was written by a newer version (one that knows more migrations)."""
    known = numbered_migrations(folder)
    newest = known[-1][0] if known else 0
    if current > newest:
        raise SchemaTooNew(
            "the journal was written by a newer version of this program",
            schema_version=current,
            supported=newest,
        )
    return [(number, path) for number, path in known if number > current]
