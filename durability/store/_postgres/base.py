"""PostgreSQL's dialect for the table modules (durability/store/_tables/)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from durability.store._sql import SqlTx

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
#: statements in ``%s`` markers, by their ``?`` text (a bounded set: the modules' SQL)
_IN_MARKS: dict[str, str] = {}


class PostgresBase(SqlTx):
    """One transaction on one connection (``conn``: a psycopg Connection)."""

    mark = "%s"
    order = "no"
    chain_sql = _CHAIN

    def __init__(self, conn: Any, *, locking: bool = False) -> None:
        self.conn = conn
        #: In a write transaction every row read to decide a write is locked as it is read
        #: (``FOR NO KEY UPDATE``): READ COMMITTED then behaves like SQLite's single writer
        #: for each run, call, document and conflict (see durability/store/postgres.py).
        self.lock = " FOR NO KEY UPDATE" if locking else ""

    def q(self, sql: str) -> str:
        converted = _IN_MARKS.get(sql)
        if converted is None:
            converted = _IN_MARKS[sql] = sql.replace("?", "%s")
        return converted

    def insert_id(self, sql: str, args: Sequence[Any]) -> int:
        return int(self.scalar(sql + " RETURNING id", args))

    def among(self, column: str, values: list[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [values]

    def batches(self, values: Iterable[Any]) -> Iterator[list[Any]]:
        wanted = list(dict.fromkeys(values))
        if wanted:
            yield wanted
