"""The dialect every table object is built with: one connection, and what differs between
the engines' SQL.

Table objects (durability/store/_tables/) write their SQL once, with ``?`` markers, in the
SQL both engines take, and run it through their ``Sql``. An engine's subclass
(durability/store/sqlite_tx.py, durability/store/postgres_tx.py) says: its marker, its row
lock, its rowid column, how it matches a list and returns a new row's id, and how its
driver's row factory builds records (durability/store/_shapes.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from durability.status import OPEN_RUN_STATUSES, TERMINAL_RUN_STATUSES, CallState, RunStatus
from durability.store._shapes import Shape

R = TypeVar("R")


def constants(*values: str) -> str:
    """SQL text of constant values (members of the status enums), quoted and separated by
    commas, for a statement built once at import: ``f"status IN ({constants(*OPEN)})"``."""
    for value in values:
        if not re.fullmatch(r"[a-z_ ]+", value):
            raise ValueError(f"not a plain constant: {value!r}")
    return ", ".join(f"'{value}'" for value in values)


#: The statuses the statements test, as SQL text (from durability/status.py).
ACTIVE_RUN = constants(RunStatus.ACTIVE)
OPEN_RUNS = constants(*OPEN_RUN_STATUSES)
FINISHED_RUNS = constants(*TERMINAL_RUN_STATUSES)
OPEN_CALL = constants(CallState.OPEN)

#: positional arguments, or named ones for a statement written in ``%(name)s`` style
Args = Sequence[Any] | Mapping[str, Any]


class Sql:
    """One transaction's connection in one engine's dialect."""

    #: the parameter marker
    mark = "?"
    #: appended to a read that decides a write (PostgreSQL locks the row; SQLite has one writer)
    lock = ""
    #: the column that orders rows by insertion
    order = "rowid"
    #: a history chain's nodes from its head (blobs: ``history_chain``), by (head, limit)
    chain_sql = ""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def q(self, sql: str) -> str:
        """``sql`` (written with ``?``) in this engine's marker."""
        return sql

    def run(self, sql: str, args: Args = ()) -> Any:
        return self.conn.execute(self.q(sql), args)

    def cursor(self, shape: Shape[R]) -> Any:
        """A cursor whose rows are ``shape``'s records (the driver's row factory)."""
        raise NotImplementedError

    def one(self, shape: Shape[R], sql: str, args: Args = ()) -> R | None:
        """The first row of ``sql`` as a record (``sql`` selects ``shape``'s columns)."""
        found: R | None = self.cursor(shape).execute(self.q(sql), args).fetchone()
        return found

    def all(self, shape: Shape[R], sql: str, args: Args = ()) -> list[R]:
        found: list[R] = self.cursor(shape).execute(self.q(sql), args).fetchall()
        return found

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


class Table:
    """A table object: its statements, run through one transaction's ``Sql``."""

    def __init__(self, sql: Sql) -> None:
        self.sql = sql
