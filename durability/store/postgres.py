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

import hashlib
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
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
from durability.store._tables.claims import fence_query
from durability.store.base import (
    FencedOp,
    Store,
    StoreTx,
    numbered_migrations,
    operation_name,
    pending_migrations,
)
from durability.store.postgres_tx import PostgresTx, integrity_problems

T = TypeVar("T")

logger = logging.getLogger("a0.durability.postgres")

MIGRATIONS_DIR = Path(__file__).parent / "migrations" / "postgres"
NAMESPACE_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: SQLSTATEs after which a write is run again from the start (nothing was committed).
_RETRY_STATES = {"40001", "40P01"}
_UNIQUE_VIOLATION = "23505"
MAX_ATTEMPTS = 30
#: A connection lost before COMMIT: run again on a fresh connection this many times.
MAX_CONNECTION_RETRIES = 2


def migrations() -> list[tuple[int, Path]]:
    """Numbered migration files of this engine, in order."""
    return numbered_migrations(MIGRATIONS_DIR)


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not NAMESPACE_PATTERN.match(namespace):
        raise InvalidArgument(
            "the namespace must be a lowercase SQL name (letters, digits, _; at most 63)",
            field="namespace",
        )
    if namespace.startswith("pg_"):
        raise InvalidArgument("a namespace may not start with pg_", field="namespace")
    return namespace


class _Retry(Exception):
    """Internal: run the write again (serialisation failure, deadlock, lost connection)."""

    def __init__(self, cause: BaseException, connection: bool = False) -> None:
        super().__init__(type(cause).__name__)
        self.cause = cause
        self.connection = connection


class PostgresStore(Store):
    engine = "postgres"
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
                self._migrate(conn)
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

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        lock_key = int.from_bytes(
            hashlib.sha256(f"a0-migrate:{self.namespace}".encode()).digest()[:8], "big", signed=True
        )
        ident = sql.Identifier(self.namespace)
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
                " name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
            )
            row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
            current = int(row[0]) if row else 0
            for number, path in pending_migrations(MIGRATIONS_DIR, current):
                conn.execute(path.read_text(encoding="utf-8").encode("utf-8"))
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                    (number, path.name, time.time()),
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.pgconn.transaction_status != psycopg.pq.TransactionStatus.UNKNOWN:
                conn.execute("ROLLBACK")
            raise

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
        fence: str | None = None,
    ) -> T:
        """Run ``fn(conn)`` in one transaction: ``mode`` is ``write`` (READ COMMITTED, run
        again after a deadlock, a serialisation failure or a unique violation; a lost commit
        acknowledgement is settled) or ``read`` (REPEATABLE READ READ ONLY). ``name`` names
        the operation in log lines (default: ``fn``'s). ``fence`` (a write's): a statement
        locking a run's row and reading its token, sent with BEGIN in one round trip;
        ``fn(conn, found)`` then gets its row (run id, token) or None."""
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
                return self._run_once(begin, fn, writes, fence)
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

    def _begin(
        self, conn: psycopg.Connection[Any], begin: str, writes: bool, fence: str | None
    ) -> tuple[str | None, Any]:
        """Open the transaction; a write's id, and the fence's row (``fence``), come back
        in the same round trip."""
        if not writes:
            conn.execute(begin)
            return None, None
        cursor = conn.execute(f"{begin}; {outcome.XID_QUERY}" + (f"; {fence}" if fence else ""))
        cursor.nextset()
        row = cursor.fetchone()
        xid = None if row is None else str(row[0])
        if fence is None:
            return xid, None
        cursor.nextset()
        found = cursor.fetchone()
        return xid, None if found is None else (str(found[0]), found[1])

    def _run_once(
        self, begin: str, fn: Callable[..., T], writes: bool, fence: str | None = None
    ) -> T:
        committing = False
        xid: str | None = None
        value: Any = None
        refusal: DurabilityError | None = None
        try:
            with self._connection() as conn:
                try:
                    xid, found = self._begin(conn, begin, writes, fence)
                    try:
                        value = fn(conn) if fence is None else fn(conn, found)
                    except DurabilityError as exc:
                        if exc.keeps_writes:
                            committing, refusal = True, exc
                            conn.execute("COMMIT")
                        else:
                            conn.execute("ROLLBACK")
                        raise
                    committing = True
                    conn.execute("COMMIT")
                    return cast(T, value)
                except BaseException:
                    status = conn.pgconn.transaction_status
                    if status in (
                        psycopg.pq.TransactionStatus.INTRANS,
                        psycopg.pq.TransactionStatus.INERROR,
                    ):
                        try:
                            conn.execute("ROLLBACK")
                        except psycopg.Error:
                            pass
                    raise
        except (DurabilityError, PoolTimeout):
            raise
        except psycopg.Error as exc:
            state = exc.sqlstate or ""
            if state in _RETRY_STATES or state == _UNIQUE_VIOLATION:
                raise _Retry(exc) from None
            if outcome.is_connection_error(exc):
                if committing and writes:  # committed or not: settled by ``run``
                    raise outcome.LostAck(xid, value, refusal, str(exc).strip()[:300]) from None
                raise _Retry(exc, connection=True) from None  # a read: nothing to know
            raise self.translate(exc) from None

    def write(self, fn: Callable[[StoreTx], T]) -> T:
        if isinstance(fn, FencedOp):  # the fence is read in BEGIN's round trip
            op, verify = fn.op, fn.verify

            def fenced(conn: psycopg.Connection[Any], found: Any) -> T:
                verify(found)
                return op(self._tx(conn, locking=True))

            try:
                where = fence_query(fn.run_id, fn.call_id)
            except psycopg.Error as exc:  # an id that cannot be a literal (NUL)
                raise self.translate(exc) from None
            return self.run("write", fenced, name=operation_name(op), fence=where)
        return self.run(
            "write", lambda conn: fn(self._tx(conn, locking=True)), name=operation_name(fn)
        )

    def read(self, fn: Callable[[StoreTx], T]) -> T:
        return self.run("read", lambda conn: fn(self._tx(conn)))

    def _tx(self, conn: Any, *, locking: bool = False) -> PostgresTx:
        tx = PostgresTx(conn, locking=locking)
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
        self._closed = True
        self._pool.close()
