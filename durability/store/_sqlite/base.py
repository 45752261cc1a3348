"""What every table module of the SQLite engine builds on: one connection, named rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from durability.store._rows import Columns, Named
from durability.store.base import StoreTx


def placeholders(n: int) -> str:
    return ",".join("?" * n)


class SqliteBase(StoreTx):
    mark = "?"  # the parameter marker (durability/store/_tasks.py writes its SQL with it)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

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

    def scalars(self, sql: str, args: Iterable[Any] = ()) -> list[Any]:
        """The first column of every row."""
        return [row[0] for row in self.conn.execute(sql, tuple(args)).fetchall()]
