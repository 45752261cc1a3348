"""PostgreSQL's StoreTx: every operation's SQL, one module per table in
durability/store/_postgres/ (see its __init__ for the dialect's differences from SQLite).

Rows are mapped to records by column name (durability/store/_rows.py, shared with the
SQLite engine).
"""

from __future__ import annotations

from durability.store._postgres.blobs import BlobRows
from durability.store._postgres.calls import CallRows
from durability.store._postgres.checkpoints import CheckpointRows
from durability.store._postgres.claims import ClaimRows
from durability.store._postgres.decisions import DecisionRows
from durability.store._postgres.documents import DocumentRows
from durability.store._postgres.events import EventRows
from durability.store._postgres.inputs import InputRows
from durability.store._postgres.runs import RunRows
from durability.store._tasks import TaskRows


class PostgresTx(
    InputRows,
    RunRows,
    CallRows,
    BlobRows,
    CheckpointRows,
    DocumentRows,
    DecisionRows,
    EventRows,
    ClaimRows,
    TaskRows,
):
    """Row-level operations on one connection, inside its current transaction."""


__all__ = ["PostgresTx"]
