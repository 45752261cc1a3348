"""SQLite's dialect for the table modules (durability/store/_tables/)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from durability.store._sql import Args, SqlTx

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


class SqliteBase(SqlTx):
    chain_sql = _CHAIN

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def run(self, sql: str, args: Args = ()) -> Any:
        # the modules' SQL is SQLite's already: no translation on the hot path
        return self.conn.execute(sql, args)

    def insert_id(self, sql: str, args: Sequence[Any]) -> int:
        return int(self.conn.execute(sql, args).lastrowid or 0)

    def among(self, column: str, values: list[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({placeholders(len(values))})", values

    def batches(self, values: Iterable[Any]) -> Iterator[list[Any]]:
        wanted = list(dict.fromkeys(values))
        for start in range(0, len(wanted), _BATCH):
            yield wanted[start : start + _BATCH]
