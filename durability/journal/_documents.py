"""Documents (the durable plan) and their conflicts, blobs, events, and record checks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durability import documents, integrity
from durability.canonical import digest, digest_bytes, storable_json
from durability.errors import BlobNotFound, ConflictNotFound, InvalidArgument
from durability.journal._plan import Plan, read, run_write, write
from durability.journal._validation import (
    mask_storable,
    require_digest,
    require_int,
    require_text,
)
from durability.records import Conflict, Document, Event
from durability.store.base import StoreTx

if TYPE_CHECKING:  # pragma: no cover
    from durability.journal._core import Journal


def read_document(context_id: str, kind: str) -> Plan[Document]:
    return read(lambda tx: documents.read_document(tx, context_id, kind))


def replace_document(
    journal: Journal, context_id: str, kind: str, value: Any, expected_revision: int, actor: str
) -> Plan[Document]:
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


def list_conflicts(context_id: str | None, unresolved_only: bool) -> Plan[list[Conflict]]:
    return read(lambda tx: tx.list_conflicts(context_id, unresolved_only))


def get_conflict(conflict_id: int) -> Plan[Conflict]:
    def op(tx: StoreTx) -> Conflict:
        conflict = tx.get_conflict(conflict_id)
        if conflict is None:
            raise ConflictNotFound("no such conflict", conflict_id=conflict_id)
        return conflict

    return read(op)


def resolve_conflict(
    journal: Journal, conflict_id: int, resolution: str, actor: str
) -> Plan[Conflict]:
    require_text("resolution", resolution, max_length=64)
    require_text("actor", actor)
    now = journal.clock()

    def op(tx: StoreTx) -> Conflict:
        conflict = tx.get_conflict(conflict_id)
        if conflict is None:
            raise ConflictNotFound("no such conflict", conflict_id=conflict_id)
        if conflict.resolved_at is None:
            tx.resolve_conflict(conflict_id, resolution, actor, now)
        return tx.get_conflict(conflict_id)  # type: ignore[return-value]

    return write(op)


def put_blob(journal: Journal, data: bytes) -> Plan[str]:
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
        tx.put_blob(blob_hash, data, now)
        return blob_hash

    return write(op)


def get_blob(blob_hash: str) -> Plan[bytes]:
    require_digest("blob_hash", blob_hash)

    def op(tx: StoreTx) -> bytes:
        data = tx.get_blobs([blob_hash]).get(blob_hash)
        if data is None:
            raise BlobNotFound("no such blob", blob_hash=blob_hash)
        return data

    return read(op)


def append_event(
    journal: Journal, context_id: str, type: str, payload: Any, run_id: str | None
) -> Plan[Event]:
    require_text("context_id", context_id)
    require_text("type", type, max_length=64)
    masked = mask_storable(journal.masker, payload)
    payload_digest = digest(masked)
    now = journal.clock()

    def op(tx: StoreTx) -> Event:
        event_id = tx.insert_event(context_id, run_id, type, masked, now, payload_digest)
        return Event(event_id, context_id, run_id, type, masked, now, payload_digest)

    if run_id is None:
        return write(op)
    return run_write(op, run_id=run_id)


def list_events(
    context_id: str | None, run_id: str | None, after_id: int, limit: int, verify: bool
) -> Plan[list[Event]]:
    def checked(events: list[Event]) -> list[Event]:
        if verify:
            for event in events:
                integrity.require_event(event)
        return events

    return read(lambda tx: tx.list_events(context_id, run_id, after_id, limit), after=checked)


def verify_records() -> Plan[integrity.RecordsReport]:
    return read(integrity.verify_records)
