"""Every journal operation, one class per area; both facades inherit them all.

``Journal`` (durability/journal/_core.py) and ``AsyncJournal`` (_async.py) both derive from
``Operations``: each operation is declared once (``@operation`` in its area's module,
durability/journal/_operation.py) and reads as a synchronous method on the journal and an
asynchronous one on ``journal.aio``.
"""

from __future__ import annotations

from durability.journal._admission import AdmissionOps
from durability.journal._atomic import AtomicOps
from durability.journal._calls import CallOps
from durability.journal._chats import ChatOps
from durability.journal._checkpoints import CheckpointOps
from durability.journal._documents import DocumentOps, RecordOps
from durability.journal._evidence import EvidenceOps
from durability.journal._grants import GrantOps
from durability.journal._run_ops import DecisionOps, RunOps
from durability.journal._tasks import TaskOps


class Operations(
    AdmissionOps,
    CallOps,
    AtomicOps,
    CheckpointOps,
    RunOps,
    DecisionOps,
    EvidenceOps,
    GrantOps,
    DocumentOps,
    TaskOps,
    ChatOps,
    RecordOps,
):
    """Admit inputs, journal call intents and results, checkpoint, decide, and read back."""
