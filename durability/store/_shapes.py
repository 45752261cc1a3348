"""How rows become records: a record's dataclass is its table's column list.

A ``Shape`` names the columns a SELECT lists (the record's fields, in order, unless told
otherwise) and builds the record from a row by column name. The drivers' own row
factories call it: ``sqlite3.Row`` gives SQLite's rows their names
(``Shape.from_sqlite``), psycopg's ``kwargs_row`` hands PostgreSQL's columns over as
keyword arguments (durability/store/postgres_tx.py); columns stored as JSON text are
decoded on the way, and the few a driver may return in another type are converted.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from durability.canonical import canonical_json, load_json

R = TypeVar("R")

#: Results whose JSON is larger than this are spilled into the blobs table.
RESULT_SPILL_BYTES = 256 * 1024


def dump(value: Any) -> str:
    return canonical_json(value)


def load(text: str | bytes | None) -> Any:
    return load_json(text)  # damage comes back as an Undecodable marker, never an error


class Shape(Generic[R]):
    """A record type as a table's rows: its columns, and a row (by name) made a record."""

    def __init__(
        self,
        record: Callable[..., R],
        *,
        columns: tuple[str, ...] | None = None,
        json: tuple[str, ...] = (),
        convert: Mapping[str, Callable[[Any], Any]] | None = None,
    ) -> None:
        """``record``: the dataclass (or a function taking its columns by name);
        ``columns``: the SELECT list when it is not the dataclass's fields; ``json``: the
        columns decoded from JSON text; ``convert``: a function per column to apply."""
        if columns is None:
            columns = tuple(f.name for f in dataclasses.fields(record))  # type: ignore[arg-type]
        self.record = record
        self.names = columns
        self.select = ", ".join(columns)
        decoders: dict[str, Callable[[Any], Any]] = {name: load for name in json}
        decoders.update(convert or {})
        self._decoders = tuple(decoders.items())

    def qualified(self, table: str) -> str:
        """The SELECT list with each column prefixed by ``table.``."""
        return ", ".join(f"{table}.{name}" for name in self.names)

    def placeholders(self, mark: str = "?") -> str:
        return ", ".join(mark for _ in self.names)

    def build(self, **row: Any) -> R:
        """The record from its columns by name (columns not in this shape are ignored)."""
        for name, decode in self._decoders:
            row[name] = decode(row[name])
        return self.record(**{name: row[name] for name in self.names})

    def from_sqlite(self, cursor: sqlite3.Cursor, values: tuple[Any, ...]) -> R:
        """A ``sqlite3`` row factory: the row named by ``sqlite3.Row``, then built."""
        return self.build(**sqlite3.Row(cursor, values))  # type: ignore[arg-type]

    def values(self, record: Any, **given: Any) -> tuple[Any, ...]:
        """The record's values in column order (``given`` ones instead of its fields),
        for ``?`` / ``%s`` markers, which bind faster than named ones."""
        return tuple(given[name] if name in given else getattr(record, name) for name in self.names)


def nullable(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``convert`` for a column that may be NULL."""
    return lambda value: None if value is None else convert(value)
