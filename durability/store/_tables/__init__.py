"""The journal's tables, one module each, written once for both engines.

Each module's SQL uses ``?`` markers and the SQL SQLite and PostgreSQL both take; what
differs (marker, row lock, rowid column, list matching, a new row's id) comes from the
engine's dialect base (durability/store/_sql.py). The few statements that truly differ
live with their engine: durability/store/_sqlite/ and durability/store/_postgres/.
"""

from durability.store._tables.blobs import BlobRows
from durability.store._tables.calls import CallRows
from durability.store._tables.checkpoints import CheckpointRows
from durability.store._tables.decisions import DecisionRows
from durability.store._tables.documents import DocumentRows
from durability.store._tables.events import EventRows
from durability.store._tables.inputs import InputRows
from durability.store._tables.runs import RunRows
from durability.store._tables.tasks import TaskRows
from durability.store._tables.web_sessions import WebSessionRows


class Tables(
    CallRows,
    RunRows,
    InputRows,
    BlobRows,
    CheckpointRows,
    DocumentRows,
    DecisionRows,
    EventRows,
    TaskRows,
    WebSessionRows,
):
    """Every table; an engine's StoreTx puts its own statements before it, its dialect after."""


__all__ = [
    "BlobRows",
    "CallRows",
    "CheckpointRows",
    "DecisionRows",
    "DocumentRows",
    "EventRows",
    "InputRows",
    "RunRows",
    "Tables",
    "TaskRows",
    "WebSessionRows",
]
