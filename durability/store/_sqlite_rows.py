"""SQLite's StoreTx: every operation's SQL, one module per table in durability/store/_sqlite/.

Rows are mapped to records by column name (durability/store/_rows.py, shared with the
PostgreSQL engine).
"""

from __future__ import annotations

from durability.store._rows import RESULT_SPILL_BYTES
from durability.store._sqlite.blobs import BlobRows
from durability.store._sqlite.calls import CallRows
from durability.store._sqlite.checkpoints import CheckpointRows
from durability.store._sqlite.decisions import DecisionRows
from durability.store._sqlite.documents import DocumentRows
from durability.store._sqlite.events import EventRows
from durability.store._sqlite.inputs import InputRows
from durability.store._sqlite.runs import RunRows
from durability.store._tasks import TaskRows


class SqliteTx(
    InputRows,
    RunRows,
    CallRows,
    BlobRows,
    CheckpointRows,
    DocumentRows,
    DecisionRows,
    EventRows,
    TaskRows,
):
    """Row-level operations on one SQLite connection, inside its current transaction."""


__all__ = ["RESULT_SPILL_BYTES", "SqliteTx"]
