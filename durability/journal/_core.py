"""The journal: the API the agent loop calls. Policy lives here; SQL lives in store/.

Every method is synchronous and thread-safe; a write returns once it is durable. Code on
an asyncio loop uses ``journal.aio.<method>(...)`` (durability/journal/_async.py).

This module is the journal's state and lifecycle: opening, executing plans, the thread
pool, closing. The operations (``admit``, ``record_intent``, ...) are declared once each,
in a module beside this one (_admission: inputs and runs started; _calls: intents and
results; _checkpoints; _chats: chats made without a message; _documents: documents,
conflicts, blobs, events; _run_ops: run reads, lifecycle, decisions, retry grants; _tasks:
scheduled tasks), as builders of a Plan (the transaction and its rules: _plan.py) that
durability/journal/_operation.py turns into a method of both facades. _validation holds
the checks they share; _deferral the writes that ride on the next one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from durability import checkpoints
from durability.cluster import Cluster
from durability.dsn import PostgresDsn
from durability.errors import FencingLost, JournalClosed
from durability.journal._async import AsyncJournal
from durability.journal._deferral import Deferrals
from durability.journal._operation import JournalBase
from durability.journal._operations import Operations
from durability.journal._plan import Plan, operation_name
from durability.masking import Masker
from durability.store._group_commit import DEFAULT_DEFER_SECONDS
from durability.store.base import Store, StoreTx
from durability.store.liveness import LivenessLock

T = TypeVar("T")

#: Threads of the journal's own pool (the async facade's reads, and its writes on engines
#: without native asynchronous writes). Enough for every run of a busy server to have a
#: call in flight; a thread is started only when needed.
DEFAULT_ASYNC_WORKERS = 64


class Journal(Operations, JournalBase):
    """Admit inputs, journal call intents and results, checkpoint, decide, and read back."""

    def __init__(
        self,
        store: Store,
        *,
        masker: Masker | None = None,
        clock: Callable[[], float] = time.time,
        cluster: Cluster | None = None,
        async_workers: int = DEFAULT_ASYNC_WORKERS,
        defer_seconds: float = DEFAULT_DEFER_SECONDS,
    ) -> None:
        self.store = store
        self._masker = masker or Masker({})
        self.clock = clock
        self.history_cache = checkpoints.HistoryCache()
        #: Shared workers only: this worker's claims; every run write is fenced by them.
        self.cluster = cluster
        if cluster is not None:
            cluster.on_claim = lambda claim: self.history_cache.forget(claim.context_id)
        self.async_workers = max(1, async_workers)
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._aio: AsyncJournal | None = None
        self._closed = False
        #: ``defer_seconds`` 0 commits every write at once (durability/journal/_deferral.py).
        self.deferrals = Deferrals(
            store, lambda: self._masker, defer_seconds, fenced=cluster is not None
        )

    @classmethod
    def open_sqlite(
        cls,
        path: str | os.PathLike[str],
        *,
        masker: Masker | None = None,
        clock: Callable[[], float] = time.time,
        quick_check: bool = True,
        defer_seconds: float = DEFAULT_DEFER_SECONDS,
    ) -> Journal:
        """Open (creating 0600 in a 0700 folder, migrating) the SQLite journal at ``path``."""
        from durability.store.sqlite import SqliteStore

        store = SqliteStore(path, quick_check=quick_check)
        return cls(store, masker=masker, clock=clock, defer_seconds=defer_seconds)

    @classmethod
    def open_postgres(
        cls,
        dsn: str | PostgresDsn,
        *,
        namespace: str = "agent_zero",
        masker: Masker | None = None,
        clock: Callable[[], float] = time.time,
        pool_size: int = 10,
        connect_timeout: float = 10.0,
        worker_id: str | None = None,
        lease_seconds: float = 30.0,
        liveness: bool = False,
    ) -> Journal:
        """Open (creating the schema ``namespace``, migrating) the journal on PostgreSQL.
        With ``worker_id`` it is a shared worker's: it claims the runs it admits and fences
        every run write by its claim (durability/cluster.py), and (``liveness``) holds its
        liveness lock, so that its claims end when its process does
        (durability/store/liveness.py); without, one process owns every run, like SQLite."""
        from durability.store.postgres import PostgresStore

        store = PostgresStore(
            dsn, namespace=namespace, pool_size=pool_size, connect_timeout=connect_timeout
        )
        cluster = None
        if worker_id is not None:
            try:
                cluster = Cluster(store, worker_id, lease_seconds=lease_seconds)
                if liveness:
                    cluster.liveness = LivenessLock(
                        store.dsn.conninfo,
                        store.namespace,
                        worker_id,
                        connect_timeout=connect_timeout,
                        mask=store.dsn.mask,
                    )
                    cluster.liveness.start()
            except BaseException:
                store.close()
                raise
        return cls(store, masker=masker, clock=clock, cluster=cluster)

    # executing plans
    def execute(self, plan: Plan[T]) -> T:
        """Run a plan in this thread: its transaction, then its ``after``."""
        value = self._transact(plan)
        return plan.after(value) if plan.after is not None else value

    def _transact(self, plan: Plan[T]) -> T:
        if not plan.write:
            self.store.flush()  # a read sees every write handed over before it
            return self.store.read(plan.op)
        cluster = self.cluster
        if cluster is None or not plan.fenced:
            return self.store.write(self.write_op(plan))
        try:
            return self.store.write(cluster.fenced(plan.op, plan.run_id, plan.call_id))
        except FencingLost as exc:
            cluster.refused(exc, operation_name(plan.op), plan.call_id)
            raise

    def write_op(self, plan: Plan[T]) -> Callable[[StoreTx], T]:
        """The plan's transaction; a run's write is refused after its deferred one was."""
        run_id = plan.run_id
        return plan.op if run_id is None else self.deferrals.guard(plan.op, run_id)

    def writes_natively_async(self) -> bool:
        """True when the facade hands writes straight to the store (no thread per call)."""
        return self.cluster is None and self.store.native_async_writes

    def executor(self) -> ThreadPoolExecutor:
        """The journal's own thread pool (created on first use, shut down by close)."""
        with self._executor_lock:
            if self._closed:
                raise JournalClosed("the journal is closed")
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self.async_workers, thread_name_prefix="journal-aio"
                )
            return self._executor

    # lifecycle
    @property
    def masker(self) -> Masker:
        return self._masker

    def set_masker(self, masker: Masker) -> None:
        """Use new secrets from now on (e.g. after the settings changed)."""
        self._masker = masker
        self.history_cache.clear()

    @property
    def aio(self) -> AsyncJournal:
        if self._aio is None:
            self._aio = AsyncJournal(self)
        return self._aio

    def close(self) -> None:
        with self._executor_lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)
        if self.cluster is not None:
            self.cluster.close()
        self.store.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def integrity_check(self, full: bool = False) -> list[str]:
        return self.store.integrity_check(full=full)

    def flush(self) -> None:
        """Return once every write deferred so far is committed (or refused)."""
        self.store.flush()

    # helpers
    def freeze(self, message: Any) -> checkpoints.FrozenMessage:
        """A history message masked, serialised and hashed once, for checkpoints: handed
        again at the same position it costs nothing (compared by identity). Freeze a
        message again whenever it changes."""
        return checkpoints.FrozenMessage.of(self._masker, message)
