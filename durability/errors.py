"""Typed refusals of the journal: each has a stable ``code`` and structured fields.

They know no HTTP status: the server maps each code to one (python/server/errors.py).
"""

from __future__ import annotations

from typing import Any, ClassVar


class DurabilityError(Exception):
    """Base of every journal error. ``code`` is stable; ``fields`` never hold secrets."""

    code: ClassVar[str] = "durability_error"
    #: A refusal whose own writes (e.g. a conflict row) must still be committed.
    keeps_writes: ClassVar[bool] = False

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.fields}

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__.get("fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(name)


class InvalidArgument(DurabilityError):
    code = "invalid_argument"


class NotSerializable(InvalidArgument):
    code = "not_serializable"


class InputConflict(DurabilityError):
    code = "input_conflict"


class ActiveRunExists(DurabilityError):
    code = "active_run_exists"


class RunHeld(ActiveRunExists):
    """The chat's run waits for a person's decision (a held run is still the active run)."""

    code = "run_held"


class NoActiveRun(DurabilityError):
    code = "no_active_run"


class RunNotFound(DurabilityError):
    code = "run_not_found"


class CallNotFound(DurabilityError):
    code = "call_not_found"


class RunNotActive(DurabilityError):
    code = "run_not_active"


class RunNotHeld(DurabilityError):
    code = "run_not_held"


class InvalidTransition(DurabilityError):
    code = "invalid_transition"


class OpenIntents(DurabilityError):
    code = "open_intents"


class NoOpenCall(DurabilityError):
    code = "no_open_call"


class DecisionNotApplicable(DurabilityError):
    """The decision does not fit the run's hold (durability/decision_fit.py says why)."""

    code = "decision_not_applicable"


class IntentMissing(DurabilityError):
    code = "intent_missing"


class ResultConflict(DurabilityError):
    code = "result_conflict"


class DeferredWriteRefused(DurabilityError):
    """A deferred write of this run (a result or checkpoint handed over without waiting)
    was refused when it was committed; this write was refused with it, writing nothing."""

    code = "deferred_write_refused"


class ReplayDivergence(DurabilityError):
    """The loop asked for a different call than the one journaled at that position."""

    code = "replay_divergence"
    keeps_writes = True  # the run is held with reason replay_divergence


class StaleVersion(DurabilityError):
    code = "stale_version"


class NoteRequired(DurabilityError):
    code = "note_required"


class DocumentInvalid(DurabilityError):
    code = "document_invalid"


class DocumentTooLarge(DurabilityError):
    code = "document_too_large"


class DocumentConflict(DurabilityError):
    code = "document_conflict"
    keeps_writes = True  # the conflict row is recorded for a person to resolve


class ConflictNotFound(DurabilityError):
    code = "conflict_not_found"


class BlobNotFound(DurabilityError):
    code = "blob_not_found"


class CorruptCheckpoint(DurabilityError):
    code = "corrupt_checkpoint"


class CorruptRecord(DurabilityError):
    """A stored value no longer matches its digest, or cannot be decoded: it is never used.
    Fields name the record (``record``, ``reason`` and its ids, see durability/integrity.py).
    A journal write that finds one holds the run in the same transaction."""

    code = "corrupt_record"
    keeps_writes = True  # the hold (reason corrupt_record) is committed


class CorruptDatabase(DurabilityError):
    code = "corrupt_database"


class SchemaTooNew(DurabilityError):
    code = "schema_too_new"


class FencingLost(DurabilityError):
    """This worker holds no current claim on the run (never claimed, released, or taken
    over by another worker with a newer fencing token): it may write nothing for the run."""

    code = "fencing_lost"


class ConfigurationError(DurabilityError):
    """A setting (environment variable) is missing or wrong; ``setting`` names it."""

    code = "invalid_configuration"


class ResourceRefused(DurabilityError):
    """A shared resource (attachment, work-folder file) with a name or type that could
    write outside its folder: ``..``, an absolute path, a link, a device."""

    code = "resource_refused"


class ResourceTooLarge(DurabilityError):
    code = "resource_too_large"


class ResourceUndecryptable(DurabilityError):
    """Stored resource bytes that the configured key cannot decrypt (wrong key, damage)."""

    code = "resource_undecryptable"


class ResourceNotFound(DurabilityError):
    code = "resource_not_found"


class StorageError(DurabilityError):
    code = "storage_error"


class JournalClosed(DurabilityError):
    code = "journal_closed"


class TaskNotFound(DurabilityError):
    """No scheduled task with this id (never created, or deleted)."""

    code = "task_not_found"


class TaskConflict(DurabilityError):
    """A task edit or delete named a revision that is no longer current: someone else (a
    person in the Tasks view, or an agent) changed the task since it was read."""

    code = "task_conflict"


class TaskExists(DurabilityError):
    """A task with this id already exists with another definition."""

    code = "task_exists"


class TaskInvalid(DurabilityError):
    """A task definition the scheduler cannot use; ``field`` names the part at fault."""

    code = "task_invalid"


class MemoryNotFound(DurabilityError):
    """No memory with this id in this memory subdir (never saved, or deleted)."""

    code = "memory_not_found"


class MemoryBackendUnavailable(DurabilityError):
    """Memory search cannot run on this journal; ``reason`` says what to install
    (sqlite-vec for SQLite, numpy for PostgreSQL)."""

    code = "memory_backend_unavailable"


ALL_ERRORS: tuple[type[DurabilityError], ...] = (
    DurabilityError,
    InvalidArgument,
    NotSerializable,
    InputConflict,
    ActiveRunExists,
    RunHeld,
    NoActiveRun,
    RunNotFound,
    CallNotFound,
    RunNotActive,
    RunNotHeld,
    InvalidTransition,
    OpenIntents,
    NoOpenCall,
    DecisionNotApplicable,
    IntentMissing,
    ResultConflict,
    DeferredWriteRefused,
    ReplayDivergence,
    StaleVersion,
    NoteRequired,
    DocumentInvalid,
    DocumentTooLarge,
    DocumentConflict,
    ConflictNotFound,
    BlobNotFound,
    CorruptCheckpoint,
    CorruptRecord,
    CorruptDatabase,
    SchemaTooNew,
    FencingLost,
    ConfigurationError,
    ResourceRefused,
    ResourceTooLarge,
    ResourceUndecryptable,
    ResourceNotFound,
    StorageError,
    JournalClosed,
    TaskNotFound,
    TaskConflict,
    TaskExists,
    TaskInvalid,
    MemoryNotFound,
    MemoryBackendUnavailable,
)
