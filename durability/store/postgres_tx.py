"""PostgreSQL's transaction: its dialect, its hot path for calls, and the tables only it
has (claims of shared workers, shared resources).

The dialect differs from SQLite's in: ``%s`` placeholders, ``RETURNING id`` for
``lastrowid``, ``= ANY(%s)`` for ``IN (...)``, the ``no`` identity columns for SQLite's
rowid, and row locks (``FOR NO KEY UPDATE``) on reads that decide writes. The hot-path
operations fold check and write into one statement each (data-modifying CTEs), so an
intent or a result costs one round trip besides BEGIN and COMMIT. Rows become records
through psycopg's ``kwargs_row`` row factory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.rows import kwargs_row

from durability.canonical import digest_bytes, digest_text
from durability.records import Call
from durability.store._lost_commit import XID_QUERY
from durability.store._shapes import Shape
from durability.store._sql import Sql
from durability.store._tables.calls import (
    CALLS,
    CallTable,
    Closing,
    closed_shape,
)
from durability.store._tables.claims import ClaimTable, fence_statement
from durability.store._tables.resources import ResourceTable
from durability.store.base import StoreTx

R = TypeVar("R")

# A history chain's nodes from its head, in one query: each node's "base" names the next.
# Nothing here is trusted: the caller verifies every node against its hash. The base is
# found with a pattern on the bytes escaped to text, which never fails on damaged bytes
# (a cast to JSON would abort the whole read transaction): a node without it ends the
# walk, ``n`` bounds a cycle.
_CHAIN = (
    "WITH RECURSIVE chain(hash, data, n) AS ("
    " SELECT hash, data, 1 FROM blobs WHERE hash = %s"
    " UNION ALL SELECT b.hash, b.data, chain.n + 1 FROM chain JOIN blobs b"
    " ON b.hash = substring(encode(chain.data, 'escape') from '\"base\":\"([0-9a-f]{64})\"')"
    " WHERE chain.n < %s)"
    " SELECT hash, data FROM chain"
)
#: statements in ``%s`` markers, by their ``?`` text (a bounded set: the tables' SQL)
_IN_MARKS: dict[str, str] = {}


class PostgresSql(Sql):
    """One transaction on one connection (``conn``: a psycopg Connection)."""

    mark = "%s"
    order = "no"
    chain_sql = _CHAIN

    def __init__(
        self, conn: Any, *, locking: bool = False, pipeline: Any = None, opened: Any = None
    ) -> None:
        super().__init__(conn)
        #: In a write transaction every row read to decide a write is locked as it is read
        #: (``FOR NO KEY UPDATE``): READ COMMITTED then behaves like SQLite's single writer
        #: for each run, call, document and conflict (see durability/store/postgres.py).
        self.lock = " FOR NO KEY UPDATE" if locking else ""
        #: A write transaction runs in pipeline mode (``Opened``): a statement's result, its
        #: row count included, is there once its round trip (a sync) has been made.
        self.pipeline = pipeline
        #: The write transaction's opening (``Opened``): its fence and id travel with the
        #: first statement, a hot-path function's or their own.
        self.opened: Opened | None = opened

    def run(self, sql: str, args: Any = ()) -> Any:
        if self.opened is not None:
            self.opened.send()
        cursor = self.conn.execute(self.q(sql), args)
        if self.pipeline is not None:
            self.pipeline.sync()  # everything queued so far (BEGIN, the fence) goes along
        return cursor

    def scalar(self, sql: str, args: Any = ()) -> Any:
        if self.opened is not None:
            self.opened.send()
        rows = self.conn.execute(self.q(sql), args).fetchall()  # a fetch is its round trip
        return rows[0][0] if rows else None

    def opening(self, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """Run a hot-path function (``sql``: its fence's two arguments first, then
        ``args``), which answers the transaction's id and the fence's row first when it
        opens the transaction (``Opened.carry``); the rest of its one row."""
        fence = self.opened.carry() if self.opened is not None else (None, None)
        row = self.conn.execute(sql, (*fence, *args)).fetchone()
        if self.opened is not None:
            self.opened.carried(row)
        return tuple(row[3:])

    def q(self, sql: str) -> str:
        converted = _IN_MARKS.get(sql)
        if converted is None:
            converted = _IN_MARKS[sql] = sql.replace("?", "%s")
        return converted

    def cursor(self, shape: Shape[R]) -> Any:
        if self.opened is not None:
            self.opened.send()
        return self.conn.cursor(row_factory=kwargs_row(shape.build))

    def insert_id(self, sql: str, args: Sequence[Any]) -> int:
        return int(self.scalar(sql + " RETURNING id", args))

    def among(self, column: str, values: list[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [values]

    def batches(self, values: Iterable[Any]) -> Iterator[list[Any]]:
        wanted = list(dict.fromkeys(values))
        if wanted:
            yield wanted


_TYPES = {
    "agent_no": "bigint",
    "seq": "bigint",
    "attempt": "bigint",
    "created_at": "double precision",
    "closed_at": "double precision",
}
#: ``%s::type`` for each column of a call (the functions' arguments are typed).
_TYPED_VALUES = ", ".join(f"%s::{_TYPES.get(name, 'text')}" for name in CALLS.names)
# The hot path's writes are server-side functions (PostgreSQL migration 0013): each also
# locks the fence's run row, reads its token and asks for the transaction's id, so the
# statement that opens a write transaction answers all three (``Opened``). Bound by
# position: the fence (run id, call id), then the write's values.
# attempt 1 of a position, when the run is active and the position is free (CALLS' values)
_INSERT_IF_FREE = f"SELECT * FROM a0_intent_if_free(%s::text, %s::text, {_TYPED_VALUES})"
_CLOSED = closed_shape("context_id")
# (state, result, digest, now, the call's id)
_CLOSE_OPEN = (
    "SELECT * FROM a0_close_open(%s::text, %s::text, %s::text, %s::text, %s::text,"
    " %s::double precision, %s::text)"
)


class PostgresCalls(CallTable):
    sql: PostgresSql

    def _insert_first(self, row: tuple[Any, ...], call: Call) -> bool:
        return bool(self.sql.opening(_INSERT_IF_FREE, row)[0])

    def _close_small(self, closing: Closing) -> tuple[Call, str] | None:
        c = closing
        found = self.sql.opening(_CLOSE_OPEN, (c.state, c.json, c.digest, c.now, c.call_id))
        if found[0] is None:
            return None
        return _CLOSED.build(**dict(zip(_CLOSED.names, found, strict=True)))


class PostgresTx(StoreTx):
    """Row-level operations on one connection, inside its current transaction."""

    Calls = PostgresCalls
    Claims = ClaimTable
    Resources = ResourceTable

    def __init__(
        self, conn: Any, *, locking: bool = False, pipeline: Any = None, opened: Any = None
    ) -> None:
        super().__init__(PostgresSql(conn, locking=locking, pipeline=pipeline, opened=opened))


#: The transaction's id and its fence's row in one statement (the fence a sub-select).
_XID_AND_FENCE = (
    "SELECT pg_current_xact_id(), f.* FROM (SELECT 1) AS one LEFT JOIN ({}) AS f ON true"
)
_WITH_XID: dict[str, str] = {}


class Opened:
    """A write transaction opened in pipeline mode: BEGIN is queued, not waited for, and
    so is, with the transaction's first statement, the question of its id and, with
    ``fence`` (a run id or a call id whose run is meant), the lock of the run's row and
    the read of its token: asked by a hot-path function that opens the transaction
    (``carry``), else by a statement of their own queued before the first one (``send``).
    Either way their answers come back in the first statement's round trip."""

    def __init__(
        self, conn: Any, begin: str, fence: tuple[str | None, str | None] | None, carry: bool
    ) -> None:
        conn.execute(begin, prepare=False)
        self.conn, self.fence = conn, fence
        self._pending = True  # neither sent nor carried yet
        self._carrying = False  # a hot-path function carries them
        self._cursor: Any = None
        self._xid: str | None = None
        self._found: tuple[str, int | None] | None = None
        if not carry:  # no hot-path function of the transaction's statements carries them
            self.send()

    def send(self) -> None:
        """Queue the question of the id and the fence, unless it is on its way already."""
        if not self._pending:
            return
        self._pending = False
        if self.fence is None:
            self._cursor = self.conn.execute(XID_QUERY)
            return
        statement, args = fence_statement(*self.fence)
        query = _WITH_XID.get(statement)
        if query is None:
            query = _WITH_XID[statement] = _XID_AND_FENCE.format(statement)
        self._cursor = self.conn.execute(query, args)

    def carry(self) -> tuple[str | None, str | None]:
        """The fence's arguments for a hot-path function opening the transaction ((None,
        None) once the question went, or for an unfenced write); ``carried`` takes its row."""
        if not self._pending:
            return None, None
        self._pending, self._carrying = False, True
        return self.fence or (None, None)

    def carried(self, row: tuple[Any, ...]) -> None:
        """A hot-path function's row: the transaction's id, the fence's run id and token."""
        if self._carrying:
            self._carrying = False
            self._take(row)

    def _take(self, row: tuple[Any, ...] | None) -> None:
        if row is not None:
            self._xid = str(row[0])
            if self.fence is not None and row[1] is not None:
                self._found = (str(row[1]), row[2])

    def _read(self) -> None:
        self.send()
        if self._cursor is not None:
            cursor, self._cursor = self._cursor, None
            self._take(cursor.fetchone())

    def xid(self) -> str | None:
        """The transaction's id, asked for before COMMIT is sent (a lost commit is settled
        by it: durability/store/_lost_commit.py)."""
        self._read()
        return self._xid

    def found(self) -> tuple[str, int | None] | None:
        """The fence's row: (run id, its current token), None when there is no such run or
        call (its row stays locked until the transaction ends)."""
        self._read()
        return self._found


def integrity_problems(conn: Any, newest: int, full: bool) -> list[str]:
    """A schema from another version than ``newest``; with ``full``, every checkpoint's and
    blob's digest recomputed."""
    problems: list[str] = []
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    if row is None or row[0] != newest:
        problems.append(f"schema version {row[0] if row else None}, expected {newest}")
    if not full:
        return problems
    for cp_id, body, digest in conn.execute("SELECT id, body, digest FROM checkpoints ORDER BY id"):
        if digest_text(body) != digest:
            problems.append(f"checkpoint {cp_id}: digest mismatch")
    for blob_hash, data in conn.execute("SELECT hash, data FROM blobs"):
        if digest_bytes(bytes(data)) != blob_hash:
            problems.append(f"blob {blob_hash}: digest mismatch")
    return problems


def rollback(conn: psycopg.Connection[Any]) -> None:
    """End a transaction an error left open (a lost connection has none to end)."""
    status = conn.pgconn.transaction_status
    if status in (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR):
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            pass
