"""What every table module builds on: one connection, named rows, and the engine's dialect.

Table modules (durability/store/_tables/) write their SQL once, with ``?`` markers, in the
SQL both engines take. The engine's base class (durability/store/_sqlite/base.py,
durability/store/_postgres/base.py) is the dialect: its marker, its row lock, its rowid
column, how it matches a list and returns a new row's id, and the few statements that
truly differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from durability.store._rows import Columns, Named
from durability.store.base import StoreTx

#: positional arguments, or named ones for a statement written in ``%(name)s`` style
Args = Sequence[Any] | dict[str, Any]


class SqlTx(StoreTx):
    """One transaction on one connection; subclasses set the dialect."""

    conn: Any
    #: the parameter marker (durability/store/_tasks.py writes its SQL with "?")
    mark = "?"
    #: appended to a read that decides a write (PostgreSQL locks the row; SQLite has one writer)
    lock = ""
    #: the column that orders rows by insertion
    order = "rowid"
    #: a history chain's nodes from its head (blobs: ``history_chain``), by (head, limit)
    chain_sql = ""

    def q(self, sql: str) -> str:
        """``sql`` (written with ``?``) in this engine's marker."""
        return sql

    def run(self, sql: str, args: Args = ()) -> Any:
        return self.conn.execute(self.q(sql), args)

    def one(self, columns: Columns, sql: str, args: Args = ()) -> Named | None:
        """The first row of ``sql`` (which selects ``columns`` first) by column name."""
        row = self.run(sql, args).fetchone()
        return columns.named(row) if row is not None else None

    def all(self, columns: Columns, sql: str, args: Args = ()) -> list[Named]:
        return [columns.named(row) for row in self.run(sql, args).fetchall()]

    def scalar(self, sql: str, args: Args = ()) -> Any:
        """The first column of the first row, or None when there is no row (every row is
        fetched, so a write with RETURNING has finished)."""
        rows = self.run(sql, args).fetchall()
        return rows[0][0] if rows else None

    def scalars(self, sql: str, args: Iterable[Any] = ()) -> list[Any]:
        """The first column of every row."""
        return [row[0] for row in self.run(sql, tuple(args)).fetchall()]

    def insert_id(self, sql: str, args: Sequence[Any]) -> int:
        """Run an INSERT into a table with an ``id`` key; the new row's id."""
        raise NotImplementedError

    def among(self, column: str, values: list[Any]) -> tuple[str, list[Any]]:
        """A condition "``column`` is one of ``values``" and its arguments."""
        raise NotImplementedError

    def batches(self, values: Iterable[Any]) -> Iterator[list[Any]]:
        """``values`` (duplicates dropped) in lists small enough for one ``among``."""
        raise NotImplementedError
