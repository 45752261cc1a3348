"""SQLite's transaction: its dialect, and the statements that differ from the shared tables.

The tables are durability/store/_tables/; SQLite overrides the hot path of calls (an intent
or a result in one statement besides the run's bump) and the run update (a version bump
alone writes one page). Rows become records through ``sqlite3``'s row factory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from durability.records import Call, Run
from durability.store._shapes import Shape
from durability.store._sql import ACTIVE_RUN, OPEN_CALL, Args, Sql
from durability.store._tables.calls import (
    CALLS,
    CallTable,
    Closing,
    closed_shape,
)
from durability.store._tables.memories import MemoryTable, Ranking
from durability.store._tables.runs import RunTable, run_change
from durability.store.base import StoreTx

R = TypeVar("R")

#: SQLite's default limit on host parameters is 999 (older builds): stay well under it
_BATCH = 500
# A history chain's nodes from its head, in one query: each node's "base" names the next.
# Nothing here is trusted: the caller verifies every node against its hash. The base is
# cut out of the node's canonical JSON text (keys sorted: "add" holds only hashes, so the
# first '"base":"' is the key); a node without one ends the walk, ``n`` bounds a cycle.
_TEXT = "CAST(chain.data AS TEXT)"
_CHAIN = (
    "WITH RECURSIVE chain(hash, data, n) AS ("
    " SELECT hash, data, 1 FROM blobs WHERE hash = ?"
    " UNION ALL SELECT b.hash, b.data, chain.n + 1 FROM chain JOIN blobs b"
    f' ON b.hash = substr({_TEXT}, instr({_TEXT}, \'"base":"\') + 8, 64)'
    " WHERE chain.n < ?)"
    " SELECT hash, data FROM chain"
)


def placeholders(n: int) -> str:
    return ",".join("?" * n)


class SqliteSql(Sql):
    chain_sql = _CHAIN
    conn: sqlite3.Connection

    def run(self, sql: str, args: Args = ()) -> Any:
        # the tables' SQL is SQLite's already: no translation on the hot path
        return self.conn.execute(sql, args)  # type: ignore[arg-type]

    def cursor(self, shape: Shape[R]) -> Any:
        cursor = self.conn.cursor()
        cursor.row_factory = shape.from_sqlite
        return cursor

    def insert_id(self, sql: str, args: Sequence[Any]) -> int:
        return int(self.conn.execute(sql, args).lastrowid or 0)

    def among(self, column: str, values: list[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({placeholders(len(values))})", values

    def batches(self, values: Iterable[Any]) -> Iterator[list[Any]]:
        wanted = list(dict.fromkeys(values))
        for start in range(0, len(wanted), _BATCH):
            yield wanted[start : start + _BATCH]


# attempt 1 of a position, when the run is active and the position is free: one statement
# (bound by position, in CALLS' order, then the run's id)
_INSERT_IF_FREE = (
    f"INSERT OR IGNORE INTO calls ({CALLS.select}) SELECT {placeholders(len(CALLS.names))}"
    f" WHERE EXISTS (SELECT 1 FROM runs WHERE id = ? AND status = {ACTIVE_RUN})"
)
_CLOSED = closed_shape()
_CLOSE_OPEN = (
    "UPDATE calls SET state = ?, result = ?, result_blob = NULL, result_digest = ?,"
    f" closed_at = ? WHERE id = ? AND state = {OPEN_CALL} AND EXISTS"
    f" (SELECT 1 FROM runs WHERE runs.id = calls.run_id AND runs.status = {ACTIVE_RUN})"
    f" RETURNING {_CLOSED.select}"
)
# The common change is a version bump alone (every intent, result, checkpoint): set only
# version and updated_at, which no index covers, so one page is written.
_BUMP = (
    "UPDATE runs SET version = ?, updated_at = ? WHERE id = ? AND status = ? AND reason IS ?"
    " AND reason_detail IS ? AND recovery_attempts = ?"
)


class SqliteCalls(CallTable):
    def _insert_first(self, row: tuple[Any, ...], call: Call) -> bool:
        conn = self.sql.conn
        if conn.execute(_INSERT_IF_FREE, (*row, call.run_id)).rowcount != 1:
            return False
        conn.execute(
            "UPDATE runs SET version = version + 1, updated_at = ? WHERE id = ?",
            (call.created_at, call.run_id),
        )
        return True

    def _close_small(self, closing: Closing) -> tuple[Call, str] | None:
        c = closing
        values = (c.state, c.json, c.digest, c.now, c.call_id)
        found = self.sql.cursor(_CLOSED).execute(_CLOSE_OPEN, values).fetchall()
        if not found:
            return None
        call, _ = found[0]
        return call, self.runs.bump_active(call.run_id, c.now)  # type: ignore[return-value]


class SqliteRuns(RunTable):
    def update(self, run: Run) -> None:
        status, version, reason, detail, attempts, updated_at, run_id = run_change(run)
        bump = (version, updated_at, run_id, status, reason, detail, attempts)
        if self.sql.conn.execute(_BUMP, bump).rowcount:
            return
        super().update(run)


class SqliteMemories(MemoryTable):
    """Ranks in SQL with sqlite-vec (loaded into every connection of the store), and tells
    an in-memory copy of the vectors what changed (migration 0010)."""

    # "+subdir": without it the planner walks every memory of the subdir by an index on
    # (subdir, ...) instead of looking the few ids up (a 10-id get read all 10k rows)
    _BY_IDS = "+subdir = ?"

    def matrix_state(self) -> tuple[int, int, int, int] | None:
        row = self.sql.conn.execute(
            "SELECT moves, deletes, top_deleted, (SELECT COALESCE(MAX(seq), 0) FROM memories)"
            " FROM memory_changes WHERE one = 1"
        ).fetchone()
        return int(row[0]), int(row[1]), int(row[2]), int(row[3])

    def matrix_seqs(self, subdir: str, model: str) -> list[int]:
        # read from the index on (subdir, model, area), which holds each row's seq
        rows = self.sql.conn.execute(
            "SELECT seq FROM memories WHERE subdir = ? AND model = ?", (subdir, model)
        ).fetchall()
        return [int(r[0]) for r in rows]

    def matrix_rows(
        self, subdir: str, model: str, dim: int, after: int
    ) -> Iterator[tuple[int, str, str, bytes]]:
        cursor = self.sql.conn.execute(
            "SELECT seq, id, area, vector FROM memories NOT INDEXED WHERE seq > ? AND subdir = ?"
            " AND model = ? AND dim = ? ORDER BY seq",
            (after, subdir, model, dim),
        )
        while batch := cursor.fetchmany(_BATCH):
            yield from batch

    batch = _BATCH

    def ranking(self, query: bytes) -> Ranking:
        # rank ids only (the vector is the one column read per row), then fetch the winners
        # one pass over the table (NOT INDEXED: a scan reads pages in order, where the
        # subdir index would visit every row by a random lookup)
        return Ranking(
            "SELECT id, 1.0 - vec_distance_cosine(vector, ?) AS score FROM memories NOT INDEXED",
            [query],
            "score >= ?",
            [],
        )


class SqliteTx(StoreTx):
    """Row-level operations on one SQLite connection, inside its current transaction."""

    Runs = SqliteRuns
    Calls = SqliteCalls
    Memories = SqliteMemories

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(SqliteSql(conn))
