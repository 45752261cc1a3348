"""The storage interface. Policy lives in durability/journal.py; a backend only stores rows
and turns its database's errors into durability errors.

A backend offers transactions through ``write(fn)`` and ``read(fn)``: ``fn`` receives a
``StoreTx`` and runs inside one transaction. ``write`` returns only once that transaction is
durable; a ``DurabilityError`` raised by ``fn`` rolls back ``fn``'s own writes (unless the
error ``keeps_writes``) and is re-raised to the caller after the commit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from durability.records import Call, Conflict, Decision, Event, RetryGrant, Run

T = TypeVar("T")


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


class StoreTx(ABC):
    """Row-level operations inside one transaction. Values are already masked."""

    # contexts and inputs
    @abstractmethod
    def ensure_context(self, context_id: str, now: float) -> None: ...

    @abstractmethod
    def get_input(self, input_id: str) -> InputRow | None: ...

    @abstractmethod
    def insert_input(self, row: InputRow) -> None: ...

    # runs
    @abstractmethod
    def insert_run(self, run: Run) -> None: ...

    @abstractmethod
    def get_run(self, run_id: str) -> Run | None: ...

    @abstractmethod
    def open_run_for_context(self, context_id: str) -> Run | None: ...

    @abstractmethod
    def update_run(self, run: Run) -> None: ...

    @abstractmethod
    def list_runs(
        self, statuses: Sequence[str] | None, context_id: str | None, limit: int
    ) -> list[Run]: ...

    @abstractmethod
    def delete_run(self, run_id: str) -> None: ...

    # calls
    @abstractmethod
    def insert_call(self, call: Call) -> None: ...

    @abstractmethod
    def get_call(self, call_id: str) -> Call | None: ...

    @abstractmethod
    def latest_call_at(self, run_id: str, agent_no: int, seq: int) -> Call | None: ...

    @abstractmethod
    def update_call(self, call: Call) -> None: ...

    @abstractmethod
    def list_calls(self, run_id: str, states: Sequence[str] | None = None) -> list[Call]: ...

    # blobs
    @abstractmethod
    def put_blob(self, blob_hash: str, data: bytes, now: float) -> bool:
        """Store bytes under their hash once; True when they were new."""

    @abstractmethod
    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]: ...

    # checkpoints
    @abstractmethod
    def insert_checkpoint(
        self, run_id: str, context_id: str, seq: int | None, body: str, digest: str, now: float
    ) -> int: ...

    @abstractmethod
    def latest_checkpoint(
        self, *, run_id: str | None = None, context_id: str | None = None
    ) -> CheckpointRow | None: ...

    @abstractmethod
    def get_checkpoint(self, checkpoint_id: int) -> CheckpointRow | None: ...

    # documents and conflicts
    @abstractmethod
    def get_document(self, context_id: str, kind: str) -> DocumentRow | None: ...

    @abstractmethod
    def put_document(self, row: DocumentRow) -> None: ...

    @abstractmethod
    def insert_conflict(
        self,
        context_id: str,
        kind: str,
        expected_revision: int,
        actual_revision: int,
        proposed: object,
        actor: str,
        now: float,
    ) -> int: ...

    @abstractmethod
    def get_conflict(self, conflict_id: int) -> Conflict | None: ...

    @abstractmethod
    def list_conflicts(self, context_id: str | None, unresolved_only: bool) -> list[Conflict]: ...

    @abstractmethod
    def resolve_conflict(
        self, conflict_id: int, resolution: str, actor: str, now: float
    ) -> None: ...

    # decisions and retry grants
    @abstractmethod
    def insert_decision(self, decision: Decision) -> int: ...

    @abstractmethod
    def decision_on_version(self, run_id: str, version: int) -> Decision | None: ...

    @abstractmethod
    def list_decisions(self, run_id: str) -> list[Decision]: ...

    @abstractmethod
    def insert_grant(self, run_id: str, attempts: int, actor: str, now: float) -> int: ...

    @abstractmethod
    def consume_grant(self, run_id: str) -> bool: ...

    @abstractmethod
    def list_grants(self, run_id: str) -> list[RetryGrant]: ...

    # events
    @abstractmethod
    def insert_event(
        self, context_id: str, run_id: str | None, type: str, payload: object, now: float
    ) -> int: ...

    @abstractmethod
    def list_events(
        self, context_id: str | None, run_id: str | None, after_id: int, limit: int
    ) -> list[Event]: ...


class Store(ABC):
    """A journal backend: transactions, integrity checks, lifecycle."""

    engine: str = "abstract"

    @abstractmethod
    def write(self, fn: Callable[[StoreTx], T]) -> T:
        """Run ``fn`` in a write transaction; return once it is durable (group commit)."""

    @abstractmethod
    def read(self, fn: Callable[[StoreTx], T]) -> T:
        """Run ``fn`` against one consistent snapshot."""

    @abstractmethod
    def integrity_check(self, full: bool = False) -> list[str]:
        """Problems found (empty when healthy). ``full`` runs the slow, thorough check."""

    @abstractmethod
    def close(self) -> None: ...
