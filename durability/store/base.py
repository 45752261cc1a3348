"""The storage interface. Policy lives in durability/journal.py; a backend only stores rows
and turns its database's errors into durability errors.

A backend offers transactions through ``write(fn)`` and ``read(fn)``: ``fn`` receives a
``StoreTx`` and runs inside one transaction. ``write`` returns only once that transaction is
durable; a ``DurabilityError`` raised by ``fn`` rolls back ``fn``'s own writes (unless the
error ``keeps_writes``) and is re-raised to the caller after the commit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from durability.errors import SchemaTooNew
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


@dataclass(frozen=True)
class TaskRow:
    """A scheduled task as stored (durability/schedules.py gives it meaning)."""

    id: str
    revision: int
    body: str
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


class StoreTx(ABC):
    """Row-level operations inside one transaction. Values are already masked.

    Stored JSON is decoded with ``durability.integrity.load_json``: damage comes back as an
    ``Undecodable`` marker, never as an error; the journal checks every digest.
    """

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

    @abstractmethod
    def contexts_with_runs(self, context_ids: Sequence[str]) -> set[str]:
        """The given chats that still have at least one run."""

    # calls
    @abstractmethod
    def insert_call(self, call: Call) -> None: ...

    @abstractmethod
    def get_call(self, call_id: str) -> Call | None: ...

    @abstractmethod
    def latest_call_at(self, run_id: str, agent_no: int, seq: int) -> Call | None: ...

    @abstractmethod
    def update_call(self, call: Call) -> None: ...

    # The journal's hot path: each folds a check and a write into as few statements as the
    # engine allows. Each writes nothing and returns False / None when its condition does not
    # hold (the journal then takes its slow path, which raises the precise error). These
    # defaults compose the operations above; an engine may override them with fewer
    # statements.
    def bump_active_run(self, run_id: str, now: float) -> str | None:
        """Version + 1 on an active run; its context id, or None (nothing written)."""
        run = self.get_run(run_id)
        if run is None or run.status != "active":
            return None
        self.update_run(dataclasses.replace(run, version=run.version + 1, updated_at=now))
        return run.context_id

    def insert_call_if_free(self, call: Call, args_json: str | None = None) -> bool:
        """Insert ``call`` (attempt 1) and bump its run, when the run is active and no call
        exists at the position; False (nothing written) otherwise."""
        run = self.get_run(call.run_id)
        if run is None or run.status != "active":
            return False
        if self.latest_call_at(call.run_id, call.agent_no, call.seq) is not None:
            return False
        self.insert_call(call)
        self.update_run(
            dataclasses.replace(run, version=run.version + 1, updated_at=call.created_at)
        )
        return True

    def close_open_call(
        self,
        call_id: str,
        state: str,
        result: Any,
        result_json: str,
        result_digest: str,
        now: float,
    ) -> tuple[Call, str] | None:
        """Store the result of an open call of an active run and bump the run; the closed
        call and the run's context id, or None (nothing written)."""
        call = self.get_call(call_id)
        if call is None or call.state != "open":
            return None
        run = self.get_run(call.run_id)
        if run is None or run.status != "active":
            return None
        done = dataclasses.replace(
            call, state=state, result=result, result_digest=result_digest, closed_at=now
        )
        self.update_call(done)
        self.update_run(dataclasses.replace(run, version=run.version + 1, updated_at=now))
        return done, run.context_id

    @abstractmethod
    def list_calls(
        self,
        run_id: str,
        states: Sequence[str] | None = None,
        from_seq: Mapping[int, int] | None = None,
    ) -> list[Call]:
        """The run's calls in journal order; with ``from_seq`` ({agent_no: seq}) only those
        at or past their agent's sequence number (any seq for an agent not named)."""

    # blobs
    @abstractmethod
    def put_blob(self, blob_hash: str, data: bytes, now: float) -> bool:
        """Store bytes under their hash once; True when they were new."""

    @abstractmethod
    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]: ...

    def history_chain(self, head: str, limit: int) -> dict[str, bytes]:
        """Read ahead: the blobs of a history chain from ``head`` (each node's ``base``
        names the next), at most ``limit``, unverified; the caller verifies each and reads
        any that is missing on its own. By default nothing is read ahead."""
        return {}

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
    def list_documents(self) -> list[DocumentRow]:
        """Every stored document (for ``verify``)."""

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
        self,
        context_id: str,
        run_id: str | None,
        type: str,
        payload: object,
        now: float,
        digest: str,
    ) -> int:
        """Append an event; ``digest`` (SHA-256 of the payload's canonical JSON) is stored
        with it and comes back as ``Event.digest``."""

    @abstractmethod
    def list_events(
        self, context_id: str | None, run_id: str | None, after_id: int, limit: int
    ) -> list[Event]: ...

    # scheduled tasks (durability/schedules.py): a write that must not lose a race is one
    # conditional statement, so it returns False (nothing written) instead of raising
    @abstractmethod
    def get_task(self, task_id: str) -> TaskRow | None: ...

    @abstractmethod
    def list_tasks(self) -> list[TaskRow]:
        """Every task, oldest first."""

    @abstractmethod
    def insert_task(self, row: TaskRow) -> bool:
        """Insert a new task; False when the id is taken."""

    @abstractmethod
    def replace_task_definition(
        self,
        task_id: str,
        expected_revision: int,
        body: str,
        digest: str,
        now: float,
        actor: str,
        done_until: float | None,
    ) -> bool:
        """A new definition at revision + 1 when the task is at ``expected_revision``
        (``done_until``, when given, only moves forward)."""

    @abstractmethod
    def delete_task(self, task_id: str, expected_revision: int | None) -> bool: ...

    @abstractmethod
    def record_task_firing(
        self, task_id: str, slot: float | None, input_id: str, run_id: str | None, now: float
    ) -> bool:
        """The latest firing; a slot also moves ``done_until`` forward (never back)."""

    @abstractmethod
    def record_task_skip(self, task_id: str, slot: float, skip_json: str) -> bool:
        """A slot handled without a firing: ``done_until`` moves past it."""

    # web UI sessions (durability/web_sessions.py)
    @abstractmethod
    def insert_web_session(self, row: WebSessionRow, keep: int) -> None:
        """Store a new session, dropping expired ones and, past ``keep`` sessions, the
        least recently seen."""

    @abstractmethod
    def get_web_session(self, id_digest: str) -> WebSessionRow | None: ...

    @abstractmethod
    def touch_web_session(self, id_digest: str, last_seen: float, expires_at: float) -> None: ...

    @abstractmethod
    def delete_web_sessions(self, id_digest: str | None, generation: str | None) -> int:
        """Delete the session ``id_digest``, or (``id_digest`` None) every session of
        ``generation`` (every session when that is None too); how many were deleted."""

    # claims (shared workers, durability/cluster.py): only engines with claims implement these
    def lock_fence(
        self, run_id: str | None = None, call_id: str | None = None
    ) -> tuple[str, int | None] | None:
        """The run (named, or through one of its calls) and its current fencing token, its
        row locked until the transaction ends; None when there is no such run or call."""
        raise NotImplementedError(f"{type(self).__name__} has no claims")

    def insert_claim(self, run_id: str, worker_id: str, lease_seconds: float) -> Any:
        """Claim a run that nobody can hold yet (the one this transaction admits)."""
        raise NotImplementedError(f"{type(self).__name__} has no claims")


class Store(ABC):
    """A journal backend: transactions, integrity checks, lifecycle."""

    engine: str = "abstract"
    #: True when ``write_async`` hands the transaction to the engine without a thread per
    #: call (the journal's async facade then prepares writes on the event loop).
    native_async_writes: bool = False
    #: True when ``defer`` hands a write over without waiting for its commit.
    deferred_writes: bool = False
    #: Longest a deferred write waits for a write to ride on (engines that defer).
    defer_seconds: float = 0.0

    def defer(self, fn: Callable[[StoreTx], Any], on_done: Callable[[Any, Any], None]) -> None:
        """Commit ``fn`` with the next write, or on its own within ``defer_seconds``;
        ``on_done(value, error)`` gets the outcome (durability/journal/_deferral.py)."""
        raise NotImplementedError(f"{type(self).__name__} does not defer writes")

    def flush(self) -> None:
        """Return once every deferred write handed over so far is answered."""
        return None  # an engine that does not defer has nothing to wait for

    async def flush_async(self) -> None:
        """``flush`` for code on an event loop."""
        return None

    @abstractmethod
    def write(self, fn: Callable[[StoreTx], T]) -> T:
        """Run ``fn`` in a write transaction; return once it is durable (group commit).

        ``fn`` may be run more than once (a backend runs it again from the start after a
        conflict, or to isolate a refused write of a batch): it reads and writes only
        through its ``tx`` and resets whatever it collects."""

    async def write_async(self, fn: Callable[[StoreTx], T]) -> T:
        """``write`` for code on an event loop (by default in a worker thread)."""
        return await asyncio.to_thread(self.write, fn)

    @abstractmethod
    def read(self, fn: Callable[[StoreTx], T]) -> T:
        """Run ``fn`` against one consistent snapshot."""

    @abstractmethod
    def integrity_check(self, full: bool = False) -> list[str]:
        """Problems found (empty when healthy). ``full`` runs the slow, thorough check."""

    @abstractmethod
    def close(self) -> None: ...


def operation_name(fn: Callable[..., object]) -> str:
    """The journal operation a transaction function belongs to, for log lines:
    ``commit_result.<locals>.op`` (or ``CallOps.commit_result.<locals>.op``) gives
    ``commit_result``; a private helper ``_admit`` gives ``admit``."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return name.split(".<locals>", 1)[0].rsplit(".", 1)[-1].lstrip("_") or name


_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def numbered_migrations(folder: Path) -> list[tuple[int, Path]]:
    """An engine's numbered migration files (``NNNN_name.sql`` in ``folder``), in order."""
    found = []
    for path in folder.iterdir():
        match = _MIGRATION_NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def pending_migrations(folder: Path, current: int) -> list[tuple[int, Path]]:
    """The migrations in ``folder`` past schema ``current``; ``schema_too_new`` when the
    journal was written by a newer version (one that knows more migrations)."""
    known = numbered_migrations(folder)
    newest = known[-1][0] if known else 0
    if current > newest:
        raise SchemaTooNew(
            "the journal was written by a newer version of this program",
            schema_version=current,
            supported=newest,
        )
    return [(number, path) for number, path in known if number > current]
