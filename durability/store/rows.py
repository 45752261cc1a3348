"""The rows the store hands back that are not journal records (durability/records.py):
what a table stores before the journal gives it meaning."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InputRow:
    input_id: str
    digest: str
    context_id: str
    run_id: str
    kind: str
    created_at: float


@dataclass(frozen=True)
class CheckpointRow:
    id: int
    run_id: str
    context_id: str
    seq: int | None
    body: str
    digest: str
    created_at: float


@dataclass(frozen=True)
class DocumentRow:
    context_id: str
    kind: str
    revision: int
    body: str
    digest: str
    updated_at: float
    updated_by: str


@dataclass(frozen=True, kw_only=True)
class TaskFields:
    """What a scheduled task's row and its record (durability/schedules.py) both hold: all
    but its definition (stored: ``body``) and its last skip (stored: JSON text)."""

    id: str
    revision: int
    digest: str
    created_at: float
    created_by: str
    updated_at: float
    updated_by: str
    done_until: float
    last_slot: float | None = None
    last_input_id: str | None = None
    last_run_id: str | None = None
    last_fired_at: float | None = None


@dataclass(frozen=True, kw_only=True)
class TaskRow(TaskFields):
    """A scheduled task as stored (durability/schedules.py gives it meaning)."""

    body: str
    last_skip: str | None = None


@dataclass(frozen=True)
class WebSessionRow:
    """A browser session of the web UI (durability/web_sessions.py gives it meaning)."""

    id_digest: str  # SHA-256 of the cookie's random id; the id itself is never stored
    generation: str  # the login credentials it was made under (a fingerprint of them)
    authenticated: bool
    csrf_token: str
    created_at: float
    last_seen: float
    expires_at: float


@dataclass(frozen=True)
class ClaimRow:
    """A shared worker's claim on a run (durability/cluster.py gives it meaning)."""

    run_id: str
    context_id: str
    worker_id: str
    token: int
    expires_at: float
    previous_worker: str | None = None
    previous_token: int | None = None


@dataclass(frozen=True)
class SnapshotRow:
    """A stored resource snapshot (durability/resources.py): its manifest is sealed."""

    id: int
    context_id: str
    run_id: str | None
    kind: str
    manifest: bytes
    total_size: int
    created_at: float


@dataclass(frozen=True)
class MemoryRow:
    """One memory as stored (durability/memory.py); ``metadata`` is the decoded JSON object
    (an ``Undecodable`` marker when damaged). The vector is read apart, only for search."""

    id: str
    subdir: str
    area: str
    text: str
    metadata: object
    model: str
    dim: int
    created_at: float
    updated_at: float
