"""The PostgreSQL backend: one schema (namespace) per installation, a pool of connections.

Concurrency: SQLite has one writer per process, so a journal operation's reads and writes
never interleave with another's. Here several workers write at once. Every write
transaction runs at READ COMMITTED and locks each row it reads to decide a write (the
run, the call, the chat's open run, the document, the conflict) as it reads it, so the
operations on one run, call or document run one after another, as under a single writer,
while different runs never wait for each other. Where two transactions could both find a
row missing and both insert it (an input id, a chat's one open run, a call position, a
document), the unique constraint refuses the second, and the whole operation is run again
from the start, as it is after a deadlock (nothing of a failed attempt was committed): the
second attempt finds the first's row and answers as a single writer would.
(SERIALIZABLE was tried first: its predicate locks are per index page, so concurrent runs
whose rows share a page failed each other: 8 concurrent runs retried ~3 times per step.)
Reads run in one REPEATABLE READ READ ONLY snapshot. PostgreSQL commits concurrent
transactions together itself (WAL group commit), so there is no group-commit writer here.

A write runs in pipeline mode: BEGIN is queued, and the query of its transaction id and,
for a shared worker's write, the fence (the run's row locked and its token read) reach the
server in the operation's first round trip: asked by the hot path's server-side function
when it opens the transaction (postgres_tx.py, ``Opened``), else a prepared statement
queued before the first one. COMMIT, sent once the id is known, is one more round trip.
The fence is verified before COMMIT is sent: a refused fence rolls the whole transaction
back (whatever the operation's statements did) and its refusal is what the caller gets.

A lost connection before COMMIT was sent is retried on a new connection (nothing can have
been committed). A lost connection during COMMIT of a write is settled here, on fresh
connections (durability/store/_lost_commit.py): PostgreSQL is asked whether the
transaction committed (its outcome is then returned) or not (the write runs again), a
bounded number of times with backoff; only when no answer comes is it a StorageError
with ``outcome_unknown=True``.

psycopg (3) and psycopg_pool are imported only by this backend's modules: the default install
stays without them (requirements-postgres.txt).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from durability.dsn import PostgresDsn
from durability.errors import (
    DurabilityError,
    InvalidArgument,
    JournalClosed,
    StorageError,
)
from durability.store import _lost_commit as outcome
from durability.store.base import (
    FencedOp,
    Store,
    StoreTx,
    operation_name,
)
from durability.store.postgres_schema import check_namespace, migrate, migrations
from durability.store.postgres_tx import Opened, PostgresTx, integrity_problems, rollback

T = TypeVar("T")

logger = logging.getLogger("a0.durability.postgres")

#: SQLSTATEs after which a write is run again from the start (nothing was committed).
_RETRY_STATES = {"40001", "40P01"}
_UNIQUE_VIOLATION = "23505"
MAX_ATTEMPTS = 30
#: A connection lost before COMMIT: run again on a fresh connection this many times.
MAX_CONNECTION_RETRIES = 2


@dataclass
class _Attempt:
    """What one attempt had done when it failed: its transaction id, its value, a refusal
    that keeps its writes, and whether COMMIT was sent (a lost COMMIT is settled by it)."""

    xid: str | None = None
    value: Any = None
    refusal: DurabilityError | None = None
    committing: bool = False


class _Retry(Exception):
    """Internal: run the write again (serialisation failure, deadlock, lost connection)."""

    def __init__(self, cause: BaseException, connection: bool = False) -> None:
        super().__init__(type(cause).__name__)
        self.cause = cause
        self.connection = connection


class PostgresStore(Store):
    engine = "postgres"
    #: fenced writes of concurrent callers share transactions (postgres_batch.py)
    group_commit = False  # measured: see bench/README.md, "Issue #24, round 3"
    group_lanes = 4  # batches in flight at once (postgres_batch.py, ``FencedWriters``)
    _writer: Any = None
    #: the pgvector extension's available version, and its schema when it ranks memories
    pgvector: str = ""
    pgvector_schema: str = ""

    def __init__(
        self,
        dsn: str | PostgresDsn,
        *,
        namespace: str = "agent_zero",
        pool_size: int = 10,
        connect_timeout: float = 10.0,
        application_name: str = "agent-zero",
    ) -> None:
        self.dsn = dsn if isinstance(dsn, PostgresDsn) else PostgresDsn(dsn)
        self.namespace = check_namespace(namespace)
        self._closed = False
        self._lock = threading.Lock()
        self.connect_timeout = connect_timeout
        self.retries = 0  # writes run again after a serialisation failure (for tests, bench)
        search_path = sql.SQL("SET search_path TO {}").format(sql.Identifier(self.namespace))

        def configure(conn: psycopg.Connection[Any]) -> None:
            conn.execute(search_path)

        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.dsn.conninfo,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={
                "autocommit": True,
                "connect_timeout": max(1, int(connect_timeout)),
                "application_name": application_name[:63],
            },
            configure=configure,
            open=False,
            timeout=connect_timeout,
            name=f"journal:{self.namespace}",
        )
        try:
            # one direct connection first: its error says what is wrong (no such database,
            # authentication), where the pool would only time out
            with psycopg.connect(
                self.dsn.conninfo, autocommit=True, connect_timeout=max(1, int(connect_timeout))
            ) as conn:
                configure(conn)
                migrate(conn, self.namespace)
                self._choose_memory_search(conn)
            self._pool.open(wait=True, timeout=connect_timeout)
        except BaseException as exc:
            self._pool.close()
            raise self.translate(exc) from None

    def _choose_memory_search(self, conn: psycopg.Connection[Any]) -> None:
        """Memory search on this server (durability/store/postgres_vectors.py, ``choose``)."""
        from durability.store import postgres_vectors

        found = postgres_vectors.choose(conn)
        self.pgvector, self.pgvector_schema = found.version, found.schema
        self.memory_search_backend, self.memory_search_problem = found.backend, found.problem

    def __repr__(self) -> str:
        return f"PostgresStore({self.dsn.masked!r}, namespace={self.namespace!r})"

    # errors
    def translate(self, exc: BaseException) -> BaseException:
        """Turn psycopg errors into durability errors; the DSN's password is masked."""
        if isinstance(exc, DurabilityError) or not isinstance(exc, psycopg.Error | PoolTimeout):
            return exc
        text = self.dsn.mask(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        state = getattr(exc, "sqlstate", None) or ""
        if outcome.is_connection_error(exc):
            return StorageError(
                "the journal database is unreachable", reason=text, sqlstate=state or None
            )
        if state.startswith("22") or isinstance(exc, psycopg.DataError):
            return InvalidArgument(
                "the journal cannot store this value", reason=text, sqlstate=state
            )
        if state.startswith("23"):
            return StorageError(
                "the journal refused a write (constraint)", reason=text, sqlstate=state
            )
        return StorageError("the journal database failed", reason=text, sqlstate=state or None)

    # connections and transactions
    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        if self._closed:
            raise JournalClosed("the journal is closed")
        conn = self._pool.getconn()
        try:
            yield conn
        finally:
            self._pool.putconn(conn)

    @property
    def schema_version(self) -> int:
        def op(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
            return int(row[0]) if row and row[0] is not None else 0

        return self.run("read", op)

    def run(
        self,
        mode: str,
        fn: Callable[..., T],
        *,
        name: str | None = None,
        fence: tuple[str | None, str | None] | None = None,
        carry: bool = False,
    ) -> T:
        """Run ``fn`` in one transaction: ``mode`` is ``write`` (READ COMMITTED, run again
        after a deadlock, a serialisation failure or a unique violation; a lost commit
        acknowledgement is settled) or ``read`` (REPEATABLE READ READ ONLY), ``fn(conn)``.
        A write runs in pipeline mode: ``fn(conn, pipeline, opened)``, where ``opened``
        (``postgres_tx.Opened``) has the transaction's id and the row of ``fence`` (a run
        id, or a call id whose run is meant: its row locked, its token read) read with the
        first statement; with ``carry``, a hot-path function may ask for them. ``name``
        names the operation in log lines (default: ``fn``'s)."""
        begin = {
            "write": "BEGIN ISOLATION LEVEL READ COMMITTED",
            "read": "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        }[mode]
        writes = mode != "read"
        attempt = lost = asked = 0
        deadline = 0.0
        while True:
            attempt += 1
            try:
                if writes:
                    return self._write_once(begin, fn, fence, carry)
                return self._run_once(begin, fn)
            except PoolTimeout as exc:  # no connection to be had within the timeout
                raise self.translate(exc) from None
            except outcome.LostAck as ack:
                if not asked:
                    deadline = time.monotonic() + max(2.0, self.connect_timeout)
                committed, asked = outcome.settle(
                    ack,
                    operation=name or operation_name(fn),
                    tries=asked,
                    deadline=deadline,
                    question=lambda xid, timeout: outcome.ask(self.dsn.conninfo, xid, timeout),
                    is_connection_error=outcome.is_connection_error,
                    mask=self.dsn.mask,
                )
                if committed:
                    return cast(T, ack.outcome())
            except _Retry as retry:
                lost += retry.connection
                if attempt >= MAX_ATTEMPTS or lost > MAX_CONNECTION_RETRIES:
                    raise self.translate(retry.cause) from None
                with self._lock:
                    self.retries += 1
                time.sleep(random.uniform(0, min(0.05, 0.0005 * 2**attempt)))

    @contextmanager
    def _attempt(self, state: _Attempt) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one attempt: rolled back when the attempt raises; a driver
        error becomes the store's, settled by what ``state`` says the attempt had done."""
        try:
            with self._connection() as conn:
                try:
                    yield conn
                except BaseException:
                    rollback(conn)
                    raise
        except (DurabilityError, PoolTimeout):
            raise
        except psycopg.Error as exc:
            raise self._failed(
                exc, state.xid, state.value, state.refusal, committing=state.committing
            ) from None

    def _run_once(self, begin: str, fn: Callable[..., T]) -> T:
        """A read: its own snapshot, nothing to commit."""
        with self._attempt(_Attempt()) as conn:
            conn.execute(begin)
            value = fn(conn)
            conn.execute("COMMIT")
            return value

    def _write_once(self, begin: str, fn: Callable[..., T], fence: Any, carry: bool) -> T:
        """One attempt of a write, in pipeline mode: BEGIN, the transaction's id and the
        fence travel with the first statement; COMMIT (sent once the id is known) is one
        round trip with its flush."""
        state = _Attempt()
        with self._attempt(state) as conn, conn.pipeline() as pipeline:
            opened = Opened(conn, begin, fence, carry)
            try:
                state.value = fn(conn, pipeline, opened)
            except DurabilityError as exc:
                if exc.keeps_writes:
                    state.xid = opened.xid()
                    state.committing, state.refusal = True, exc
                    conn.execute("COMMIT", prepare=False)
                else:
                    conn.execute("ROLLBACK", prepare=False)
                raise
            state.xid = opened.xid()
            state.committing = True
            conn.execute("COMMIT", prepare=False)
        return cast(T, state.value)

    def _failed(
        self,
        exc: psycopg.Error,
        xid: str | None,
        value: Any,
        refusal: DurabilityError | None,
        *,
        committing: bool,
    ) -> BaseException:
        """What a failed attempt becomes: run again, settled, or the caller's error."""
        state = exc.sqlstate or ""
        if state in _RETRY_STATES or state == _UNIQUE_VIOLATION:
            return _Retry(exc)
        if outcome.is_connection_error(exc):
            if committing:  # committed or not: settled by ``run``
                return outcome.LostAck(xid, value, refusal, str(exc).strip()[:300])
            return _Retry(exc, connection=True)  # nothing can have been committed
        return self.translate(exc)

    def write(self, fn: Callable[[StoreTx], T]) -> T:
        """A shared worker's fenced write shares a transaction with the fenced writes of
        other runs queued meanwhile (durability/store/postgres_batch.py); alone, and any
        other write, it runs in a transaction of its own (``write_alone``)."""
        if self.group_commit and isinstance(fn, FencedOp):
            with self._lock:
                if self._writer is None:
                    from durability.store.postgres_batch import FencedWriters

                    self._writer = FencedWriters(self, self.group_lanes)
            return cast(T, self._writer.submit(fn))
        return self.write_alone(fn)

    def write_alone(self, fn: Callable[[StoreTx], T]) -> T:
        fence: tuple[str | None, str | None] | None = None
        op, verify = fn, None
        if isinstance(fn, FencedOp):  # the fence is read in the first round trip
            op, verify, fence = fn.op, fn.verify, (fn.run_id, fn.call_id)

        def body(conn: psycopg.Connection[Any], pipeline: Any, opened: Opened) -> T:
            # The operation runs once the fence is queued with BEGIN, or carried by the
            # hot-path function it opens with; it is verified before anything is committed: a
            # refused fence rolls the whole transaction back, and outranks the operation's
            # own refusal.
            try:
                value = op(self._tx(conn, locking=True, pipeline=pipeline, opened=opened))
            except DurabilityError:
                if verify is not None:
                    verify(opened.found())
                raise
            if verify is not None:
                verify(opened.found())
            return value

        carry = not isinstance(fn, FencedOp) or fn.hot_path  # its first statement may carry it
        return self.run("write", body, name=operation_name(op), fence=fence, carry=carry)

    def read(self, fn: Callable[[StoreTx], T]) -> T:
        return self.run("read", lambda conn: fn(self._tx(conn)))

    def _tx(
        self, conn: Any, *, locking: bool = False, pipeline: Any = None, opened: Any = None
    ) -> PostgresTx:
        tx = PostgresTx(conn, locking=locking, pipeline=pipeline, opened=opened)
        if self.pgvector_schema:  # memories also written to, and ranked by, pgvector
            from durability.store.postgres_vectors import memories_table

            tx.Memories = memories_table(self.pgvector_schema)
        return tx

    def integrity_check(self, full: bool = False) -> list[str]:
        """Problems found: a schema from another version; with ``full``, every checkpoint's
        and blob's digest recomputed."""

        newest = migrations()[-1][0]
        return self.run("read", lambda conn: integrity_problems(conn, newest, full))

    def close(self) -> None:
        if self._closed:
            return
        if self._writer is not None:
            self._writer.close()  # answers every queued write first
        self._closed = True
        self._pool.close()
