"""Documents (the durable plan) and their conflicts, blobs, events, and record checks."""

from __future__ import annotations

from typing import Any

from durability import documents, integrity
from durability.canonical import digest_bytes, storable_json
from durability.errors import BlobNotFound, ConflictNotFound, InvalidArgument
from durability.journal._operation import JournalBase, operation
from durability.journal._plan import Plan, read, run_write, write
from durability.journal._validation import (
    event_payload,
    require_digest,
    require_int,
    require_text,
)
from durability.records import Conflict, Document, Event
from durability.store.base import StoreTx


class DocumentOps:
    """Documents (the durable plan) and the conflicts a stale revision records."""

    @operation()
    def read_document(
        journal: JournalBase, context_id: str, kind: str = documents.PLAN_KIND
    ) -> Plan[Document]:
        """The document and its revision (0 and the empty value when never written)."""
        return read(lambda tx: documents.read_document(tx, context_id, kind))

    @operation(prepare="value")
    def replace_document(
        journal: JournalBase,
        context_id: str,
        kind: str,
        value: Any,
        *,
        expected_revision: int,
        actor: str,
    ) -> Plan[Document]:
        """Replace the whole document on ``expected_revision``; a stale revision records a
        conflict and raises DocumentConflict."""
        require_text("context_id", context_id)
        require_int("expected_revision", expected_revision)
        require_text("actor", actor)
        masked = documents.prepare_value(kind, value, journal.masker)
        storable_json(masked)
        now = journal.clock()
        return write(
            lambda tx: documents.replace_document(
                tx, context_id, kind, masked, expected_revision, actor, now
            )
        )

    @operation()
    def list_conflicts(
        journal: JournalBase, context_id: str | None = None, *, unresolved_only: bool = True
    ) -> Plan[list[Conflict]]:
        return read(lambda tx: tx.conflicts.list(context_id, unresolved_only))

    @operation()
    def get_conflict(journal: JournalBase, conflict_id: int) -> Plan[Conflict]:
        """One document conflict, resolved or not (ConflictNotFound when unknown)."""

        def op(tx: StoreTx) -> Conflict:
            return _conflict(tx, conflict_id)

        return read(op)

    @operation()
    def resolve_conflict(
        journal: JournalBase, conflict_id: int, *, resolution: str, actor: str
    ) -> Plan[Conflict]:
        """Mark a document conflict resolved (``resolution``: e.g. kept_current, applied)."""
        require_text("resolution", resolution, max_length=64)
        require_text("actor", actor)
        now = journal.clock()

        def op(tx: StoreTx) -> Conflict:
            if _conflict(tx, conflict_id).resolved_at is None:
                tx.conflicts.resolve(conflict_id, resolution, actor, now)
            return _conflict(tx, conflict_id)

        return write(op)


class RecordOps:
    """Blobs, events, and the check of every record against its digest."""

    @operation(prepare="data")
    def put_blob(journal: JournalBase, data: bytes) -> Plan[str]:
        """Store bytes once under their SHA-256 (UTF-8 text is masked first)."""
        if not isinstance(data, bytes | bytearray):
            raise InvalidArgument("data must be bytes", field="data")
        data = bytes(data)
        try:
            data = journal.masker.mask_text(data.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            pass
        blob_hash = digest_bytes(data)
        now = journal.clock()

        def op(tx: StoreTx) -> str:
            tx.blobs.put(blob_hash, data, now)
            return blob_hash

        return write(op)

    @operation()
    def get_blob(journal: JournalBase, blob_hash: str) -> Plan[bytes]:
        require_digest("blob_hash", blob_hash)

        def op(tx: StoreTx) -> bytes:
            data = tx.blobs.get_many([blob_hash]).get(blob_hash)
            if data is None:
                raise BlobNotFound("no such blob", blob_hash=blob_hash)
            return data

        return read(op)

    @operation(prepare="payload")
    def append_event(
        journal: JournalBase,
        context_id: str,
        type: str,
        payload: Any = None,
        *,
        run_id: str | None = None,
    ) -> Plan[Event]:
        masked, payload_digest = event_payload(journal.masker, context_id, "type", type, payload)
        now = journal.clock()

        def op(tx: StoreTx) -> Event:
            event_id = tx.events.insert(context_id, run_id, type, masked, now, payload_digest)
            return Event(event_id, context_id, run_id, type, masked, now, payload_digest)

        if run_id is None:
            return write(op)
        return run_write(op, run_id=run_id)

    @operation()
    def list_events(
        journal: JournalBase,
        *,
        context_id: str | None = None,
        run_id: str | None = None,
        after_id: int = 0,
        limit: int = 1000,
        verify: bool = True,
    ) -> Plan[list[Event]]:
        """Events, oldest first. With ``verify`` (the default) a damaged payload among them
        raises CorruptRecord; without it (listings, exports) it is returned as stored."""

        def checked(events: list[Event]) -> list[Event]:
            if verify:
                for event in events:
                    integrity.require_event(event)
            return events

        return read(lambda tx: tx.events.list(context_id, run_id, after_id, limit), after=checked)

    @operation()
    def verify_records(journal: JournalBase) -> Plan[integrity.RecordsReport]:
        """Check every call, event, document and each run's latest checkpoint against its
        digest (any backend; ``python -m durability verify`` checks a SQLite file)."""
        return read(integrity.verify_records)


def _conflict(tx: StoreTx, conflict_id: int) -> Conflict:
    conflict = tx.conflicts.get(conflict_id)
    if conflict is None:
        raise ConflictNotFound("no such conflict", conflict_id=conflict_id)
    return conflict
