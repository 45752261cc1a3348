"""What every table module of the PostgreSQL engine builds on: one connection, named rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durability.store._rows import Columns, Named
from durability.store.base import StoreTx


def marks(n: int) -> str:
    return ",".join(["%s"] * n)


class PostgresBase(StoreTx):
    """One transaction on one connection (``conn``: a psycopg Connection)."""

    mark = "%s"  # the parameter marker (durability/store/_tasks.py writes its SQL with "?")

    def __init__(self, conn: Any, *, locking: bool = False) -> None:
        self.conn = conn
        #: In a write transaction every row read to decide a write is locked as it is read
        #: (``FOR NO KEY UPDATE``): READ COMMITTED then behaves like SQLite's single writer
        #: for each run, call, document and conflict (see durability/store/postgres.py).
        self.lock = " FOR NO KEY UPDATE" if locking else ""

    def one(
        self, columns: Columns, sql: str, args: Sequence[Any] | dict[str, Any] = ()
    ) -> Named | None:
        """The first row of ``sql`` (which selects ``columns`` first) by column name."""
        row = self.conn.execute(sql, args).fetchone()
        return columns.named(row) if row is not None else None

    def all(
        self, columns: Columns, sql: str, args: Sequence[Any] | dict[str, Any] = ()
    ) -> list[Named]:
        return [columns.named(row) for row in self.conn.execute(sql, args).fetchall()]

    def scalar(self, sql: str, args: Sequence[Any] | dict[str, Any] = ()) -> Any:
        """The first column of the first row, or None when there is no row."""
        row = self.conn.execute(sql, args).fetchone()
        return row[0] if row is not None else None
