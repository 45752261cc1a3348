"""SQLite's StoreTx: the tables (durability/store/_tables/) in SQLite's dialect.

Rows are mapped to records by column name (durability/store/_rows.py, shared with the
PostgreSQL engine).
"""

from __future__ import annotations

from durability.store._rows import RESULT_SPILL_BYTES
from durability.store._sqlite.base import SqliteBase
from durability.store._sqlite.calls import SqliteCallRows
from durability.store._sqlite.runs import SqliteRunRows
from durability.store._tables import Tables


class SqliteTx(SqliteCallRows, SqliteRunRows, Tables, SqliteBase):
    """Row-level operations on one SQLite connection, inside its current transaction."""


__all__ = ["RESULT_SPILL_BYTES", "SqliteTx"]
