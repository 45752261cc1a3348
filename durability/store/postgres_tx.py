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

from psycopg.rows import kwargs_row

from durability.canonical import digest_bytes, digest_text
from durability.records import Call
from durability.store._lost_commit import XID_QUERY
from durability.store._shapes import Shape
from durability.store._sql import ACTIVE_RUN, OPEN_CALL, Sql
from durability.store._tables.calls import (
    CALLS,
    CLOSED_COLUMNS,
    CallTable,
    Closing,
    closed_shape,
)
from durability.store._tables.claims import ClaimTable
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

    def __init__(self, conn: Any, *, locking: bool = False, pipeline: Any = None) -> None:
        super().__init__(conn)
        #: In a write transaction every row read to decide a write is locked as it is read
        #: (``FOR NO KEY UPDATE``): READ COMMITTED then behaves like SQLite's single writer
        #: for each run, call, document and conflict (see durability/store/postgres.py).
        self.lock = " FOR NO KEY UPDATE" if locking else ""
        #: A write transaction runs in pipeline mode (``Opened``): a statement's result, its
        #: row count included, is there once its round trip (a sync) has been made.
        self.pipeline = pipeline

    def run(self, sql: str, args: Any = ()) -> Any:
        cursor = self.conn.execute(self.q(sql), args)
        if self.pipeline is not None:
            self.pipeline.sync()  # everything queued so far (BEGIN, the fence) goes along
        return cursor

    def scalar(self, sql: str, args: Any = ()) -> Any:
        rows = self.conn.execute(self.q(sql), args).fetchall()  # a fetch is its round trip
        return rows[0][0] if rows else None

    def q(self, sql: str) -> str:
        converted = _IN_MARKS.get(sql)
        if converted is None:
            converted = _IN_MARKS[sql] = sql.replace("?", "%s")
        return converted

    def cursor(self, shape: Shape[R]) -> Any:
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
#: ``%s::type`` for each column: a SELECT list (unlike VALUES) has no target types.
_TYPED_VALUES = ", ".join(f"%s::{_TYPES.get(name, 'text')}" for name in CALLS.names)
# attempt 1 of a position, when the run is active and the position is free: one statement
# (bound by position: the run's version bump, then CALLS' values)
_INSERT_IF_FREE = (
    "WITH bumped AS (UPDATE runs SET version = version + 1, updated_at = %s"
    f" WHERE id = %s AND status = {ACTIVE_RUN} AND NOT EXISTS (SELECT 1 FROM calls"
    " WHERE run_id = %s AND agent_no = %s AND seq = %s) RETURNING id)"
    f" INSERT INTO calls ({CALLS.select}) SELECT {_TYPED_VALUES} FROM bumped RETURNING id"
)
_CLOSED = closed_shape("context_id")
# (bound by position: state, result, digest, now, the call's id, now again)
_CLOSE_OPEN = (
    "WITH closed AS (UPDATE calls SET state = %s, result = %s,"
    " result_blob = NULL, result_digest = %s, closed_at = %s"
    f" WHERE id = %s AND state = {OPEN_CALL} AND EXISTS (SELECT 1 FROM runs"
    f" WHERE runs.id = calls.run_id AND runs.status = {ACTIVE_RUN})"
    f" RETURNING {CALLS.select}), bumped AS (UPDATE runs SET version = version + 1,"
    " updated_at = %s FROM closed WHERE runs.id = closed.run_id RETURNING"
    f" runs.context_id) SELECT {', '.join(f'closed.{n}' for n in CLOSED_COLUMNS)},"
    " bumped.context_id FROM closed, bumped"
)


class PostgresCalls(CallTable):
    def _insert_first(self, row: tuple[Any, ...], call: Call) -> bool:
        where = (call.created_at, call.run_id, call.run_id, call.agent_no, call.seq)
        return self.sql.scalar(_INSERT_IF_FREE, (*where, *row)) is not None

    def _close_small(self, closing: Closing) -> tuple[Call, str] | None:
        c = closing
        values = (c.state, c.json, c.digest, c.now, c.call_id, c.now)
        found: tuple[Call, str] | None = self.sql.one(_CLOSED, _CLOSE_OPEN, values)
        return found


class PostgresTx(StoreTx):
    """Row-level operations on one connection, inside its current transaction."""

    Calls = PostgresCalls
    Claims = ClaimTable
    Resources = ResourceTable

    def __init__(self, conn: Any, *, locking: bool = False, pipeline: Any = None) -> None:
        super().__init__(PostgresSql(conn, locking=locking, pipeline=pipeline))


#: The transaction's id and its fence's row in one statement (the fence a sub-select).
_XID_AND_FENCE = (
    "SELECT pg_current_xact_id(), f.* FROM (SELECT 1) AS one LEFT JOIN ({}) AS f ON true"
)
_WITH_XID: dict[str, str] = {}


class Opened:
    """A write transaction opened in pipeline mode: BEGIN and one statement asking for the
    transaction's id and, with ``fence`` (a statement and its arguments), locking the
    run's row and reading its token are queued, not waited for; they reach the server with
    the transaction's first statement, and their answers come back in its round trip."""

    def __init__(self, conn: Any, begin: str, fence: tuple[str, Any] | None) -> None:
        conn.execute(begin, prepare=False)
        if fence is None:
            self._cursor: Any = conn.execute(XID_QUERY)
        else:
            query = _WITH_XID.get(fence[0])
            if query is None:
                query = _WITH_XID[fence[0]] = _XID_AND_FENCE.format(fence[0])
            self._cursor = conn.execute(query, fence[1])
        self._xid: str | None = None
        self._found: tuple[str, int | None] | None = None

    def _read(self) -> None:
        if self._cursor is not None:
            row = self._cursor.fetchone()
            self._cursor = None
            if row is not None:
                self._xid = str(row[0])
                if len(row) > 1 and row[1] is not None:
                    self._found = (str(row[1]), row[2])

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
