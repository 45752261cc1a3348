"""PostgreSQL's StoreTx: the tables (durability/store/_tables/) in PostgreSQL's dialect,
with its hot path for calls and the claims of shared workers (see
durability/store/_postgres/__init__.py for how the dialect differs from SQLite's).
"""

from __future__ import annotations

from durability.store._postgres.base import PostgresBase
from durability.store._postgres.calls import PostgresCallRows
from durability.store._postgres.claims import ClaimRows
from durability.store._tables import Tables


class PostgresTx(PostgresCallRows, ClaimRows, Tables, PostgresBase):
    """Row-level operations on one connection, inside its current transaction."""


__all__ = ["PostgresTx"]
