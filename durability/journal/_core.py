"""The journal: the API the agent loop calls. Policy lives here; SQL lives in store/.

Every method is synchronous and thread-safe; a write returns once it is durable. Code on
an asyncio loop uses ``journal.aio.<method>(...)`` (durability/journal/_async.py).

Each method checks and masks its arguments and builds a Plan (the transaction and its rules)
in a module beside this one (_admission: inputs and runs started; _calls: intents and results;
_checkpoints; _chats: chats made without a message; _documents: documents, conflicts, blobs,
events; _run_ops: run reads, lifecycle, decisions, retry grants; _tasks: scheduled tasks;
_validation: the checks they share; _deferral: writes riding on the next one), then runs it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from durability import checkpoints, documents, integrity, schedules
from durability.dsn import PostgresDsn
from durability.errors import FencingLost, JournalClosed
from durability.journal import (
    _admission,
    _calls,
    _checkpoints,
    _documents,
    _run_ops,
    _tasks,
)
from durability.journal._chats import ChatRecords
from durability.journal._checkpoints import HistoryKeys
from durability.journal._deferral import Deferrals, DeferredWrites
from durability.journal._plan import Plan, operation_name
from durability.masking import Masker
from durability.records import (
    OPEN_RUN_STATUSES,
    Admission,
    Call,
    Checkpoint,
    CheckpointData,
    CheckpointRef,
    Conflict,
    Decision,
    DecisionOutcome,
    Document,
    Event,
    RetryGrant,
    Run,
    RunDetail,
)
from durability.store._group_commit import DEFAULT_DEFER_SECONDS
from durability.store.base import Store, StoreTx

if TYPE_CHECKING:  # pragma: no cover
    from durability.cluster import Cluster
    from durability.journal._async import AsyncJournal

T = TypeVar("T")

#: Threads of the journal's own pool (the async facade's reads, and its writes on engines
#: without native asynchronous writes). Enough for every run of a busy server to have a
#: call in flight; a thread is started only when needed.
DEFAULT_ASYNC_WORKERS = 64


class Journal(DeferredWrites, ChatRecords):
    """Admit inputs, journal call intents and results, checkpoint, decide, and read back."""

    def __init__(
        self,
        store: Store,
        *,
        masker: Masker | None = None,
        clock: Callable[[], float] = time.time,
        cluster: Cluster | None = None,
        async_workers: int = DEFAULT_ASYNC_WORKERS,
        defer_seconds: float = DEFAULT_DEFER_SECONDS,
    ) -> None:
        self.store = store
        self._masker = masker or Masker({})
        self.clock = clock
        self.history_cache = checkpoints.HistoryCache()
        #: Shared workers only: this worker's claims; every run write is fenced by them.
        self.cluster = cluster
        if cluster is not None:
            cluster.on_claim = lambda claim: self.history_cache.forget(claim.context_id)
        self.async_workers = max(1, async_workers)
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._aio: AsyncJournal | None = None
        self._closed = False
        #: ``defer_seconds`` 0 commits every write at once (durability/journal/_deferral.py).
        self.deferrals = Deferrals(self, defer_seconds)

    @classmethod
    def open_sqlite(
        cls,
        path: str | os.PathLike[str],
        *,
        masker: Masker | None = None,
        clock: Callable[[], float] = time.time,
        quick_check: bool = True,
        defer_seconds: float = DEFAULT_DEFER_SECONDS,
    ) -> Journal:
        """Open (creating 0600 in a 0700 folder, migrating) the SQLite journal at ``path``."""
        from durability.store.sqlite import SqliteStore

        store = SqliteStore(path, quick_check=quick_check)
        return cls(store, masker=masker, clock=clock, defer_seconds=defer_seconds)

    @classmethod
    def open_postgres(
        cls,
        dsn: str | PostgresDsn,
        *,
        namespace: str = "agent_zero",
        masker: Masker | None = None,
        clock: Callable[[], float] = time.time,
        pool_size: int = 10,
        connect_timeout: float = 10.0,
        worker_id: str | None = None,
        lease_seconds: float = 30.0,
    ) -> Journal:
        """Open (creating the schema ``namespace``, migrating) the journal on PostgreSQL.
        With ``worker_id`` it is a shared worker's: it claims the runs it admits and fences
        every run write by its claim (durability/cluster.py); without, one process owns
        every run, like SQLite."""
        from durability.cluster import Cluster
        from durability.store.postgres import PostgresStore

        store = PostgresStore(
            dsn, namespace=namespace, pool_size=pool_size, connect_timeout=connect_timeout
        )
        cluster = None
        if worker_id is not None:
            try:
                cluster = Cluster(store, worker_id, lease_seconds=lease_seconds)
            except BaseException:
                store.close()
                raise
        return cls(store, masker=masker, clock=clock, cluster=cluster)

    # executing plans
    def execute(self, plan: Plan[T]) -> T:
        """Run a plan in this thread: its transaction, then its ``after``."""
        value = self._transact(plan)
        return plan.after(value) if plan.after is not None else value

    def _transact(self, plan: Plan[T]) -> T:
        if not plan.write:
            self.store.flush()  # a read sees every write handed over before it
            return self.store.read(plan.op)
        cluster = self.cluster
        if cluster is None or not plan.fenced:
            return self.store.write(self.write_op(plan))
        try:
            return self.store.write(cluster.fenced(plan.op, plan.run_id, plan.call_id))
        except FencingLost as exc:
            cluster.refused(exc, operation_name(plan.op), plan.call_id)
            raise

    def write_op(self, plan: Plan[T]) -> Callable[[StoreTx], T]:
        """The plan's transaction; a run's write is refused after its deferred one was."""
        run_id = plan.run_id
        return plan.op if run_id is None else self.deferrals.guard(plan.op, run_id)

    def writes_natively_async(self) -> bool:
        """True when the facade hands writes straight to the store (no thread per call)."""
        return self.cluster is None and self.store.native_async_writes

    def executor(self) -> ThreadPoolExecutor:
        """The journal's own thread pool (created on first use, shut down by close)."""
        with self._executor_lock:
            if self._closed:
                raise JournalClosed("the journal is closed")
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self.async_workers, thread_name_prefix="journal-aio"
                )
            return self._executor

    # lifecycle
    @property
    def masker(self) -> Masker:
        return self._masker

    def set_masker(self, masker: Masker) -> None:
        """Use new secrets from now on (e.g. after the settings changed)."""
        self._masker = masker
        self.history_cache.clear()

    @property
    def aio(self) -> AsyncJournal:
        if self._aio is None:
            from durability.journal._async import AsyncJournal

            self._aio = AsyncJournal(self)
        return self._aio

    def close(self) -> None:
        with self._executor_lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)
        self.store.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def integrity_check(self, full: bool = False) -> list[str]:
        return self.store.integrity_check(full=full)

    # admit
    def admit(
        self, context_id: str, input_id: str, content_digest: str, *, message: Any = None
    ) -> Admission:
        """Start a run for a new input, or return the run this input id already started.

        An input id is global: the same id and digest returns its run even when another
        chat is named (the returned run's ``context_id`` says where it went); nothing is
        created then. The same id with other content raises InputConflict."""
        return self.execute(
            _admission.admit(self, context_id, input_id, content_digest, message, "run")
        )

    def admit_intervention(
        self, context_id: str, input_id: str, content_digest: str, *, message: Any = None
    ) -> Admission:
        """Journal a message that arrived while the chat's run is active, on that run."""
        return self.execute(
            _admission.admit(self, context_id, input_id, content_digest, message, "intervention")
        )

    def input_context(self, input_id: str) -> str | None:
        """The chat an input id was admitted to, or None: a client that retries without
        knowing the chat (its first answer was lost) is sent back to the same one."""
        return self.execute(_admission.input_context(input_id))

    # calls
    def record_intent(
        self,
        run_id: str,
        *,
        agent_no: int,
        seq: int,
        kind: str,
        name: str,
        args: Any,
        policy: str,
    ) -> Call:
        """Journal a call before its effect. Returns the recorded call at this position when
        there is one (check ``call.state``: a committed result is reused, never re-run)."""
        return self.execute(
            _calls.record_intent(self, run_id, agent_no, seq, kind, name, args, policy)
        )

    def commit_result(
        self,
        call_id: str,
        result: Any,
        *,
        failed: bool = False,
        checkpoint: CheckpointData | None = None,
    ) -> Call:
        """Commit a call's outcome (optionally with a checkpoint, in one transaction).
        The same result again is a no-op; a different one raises ResultConflict."""
        return self.execute(_calls.commit_result(self, call_id, result, failed, checkpoint))

    def get_call(self, call_id: str) -> Call:
        return self.execute(_calls.get_call(call_id))

    def list_calls(self, run_id: str, *, from_seq: Mapping[int, int] | None = None) -> list[Call]:
        """The run's calls in journal order; with ``from_seq`` ({agent_no: seq}), only those
        at or past their agent's sequence number (every call of an agent not named)."""
        return self.execute(_calls.list_calls(run_id, None, from_seq))

    def open_intents(self, run_id: str) -> list[Call]:
        """Calls of the run whose intent is on disk without a result, oldest first."""
        return self.execute(_calls.list_calls(run_id, ["open"]))

    # checkpoints
    def freeze(self, message: Any) -> checkpoints.FrozenMessage:
        """A history message masked, serialised and hashed once, for checkpoints: handed
        again at the same position it costs nothing (compared by identity). Freeze a
        message again whenever it changes."""
        return checkpoints.FrozenMessage.of(self._masker, message)

    def write_checkpoint(self, run_id: str, data: CheckpointData) -> CheckpointRef:
        """Commit a masked projection of the agents' state (history stored as deltas)."""
        return self.execute(_checkpoints.write_checkpoint(self, run_id, data))

    def latest_checkpoint(self, run_id: str, *, histories: HistoryKeys = None) -> Checkpoint | None:
        """The run's newest checkpoint, validated (CorruptCheckpoint when damaged).

        ``histories`` (a collection of keys, or a predicate on a key) loads only those
        history chains; the others are left out of ``Checkpoint.histories``."""
        return self.execute(_checkpoints.latest_checkpoint(run_id, histories))

    def latest_context_checkpoint(
        self, context_id: str, *, histories: HistoryKeys = None
    ) -> Checkpoint | None:
        """The chat's newest checkpoint over all its runs (to rebuild the chat); with
        ``histories``, only those history chains (see ``latest_checkpoint``)."""
        return self.execute(_checkpoints.latest_context_checkpoint(context_id, histories))

    # runs
    def get_run(self, run_id: str) -> Run:
        return self.execute(_run_ops.get_run(run_id))

    def read_run(self, run_id: str) -> RunDetail:
        """A run with all its calls and decisions, from one snapshot."""
        return self.execute(_run_ops.read_run(run_id))

    def list_runs(
        self,
        status: str | Iterable[str] | None = None,
        *,
        context_id: str | None = None,
        limit: int = 100,
    ) -> list[Run]:
        """Runs, newest first, optionally filtered by status(es) and chat."""
        return self.execute(_run_ops.list_runs(status, context_id, limit))

    def list_nonterminal_runs(self, limit: int = 100_000) -> list[Run]:
        """Active and held runs: what a recovery scan looks at."""
        return self.list_runs(OPEN_RUN_STATUSES, limit=limit)

    def active_run(self, context_id: str) -> Run | None:
        """The chat's open run (active or held), if any."""
        return self.execute(_run_ops.active_run(context_id))

    def mark_needs_attention(self, run_id: str, reason: str, detail: Any = None) -> Run:
        """Hold a run for a person (no-op when it is already held)."""
        return self.execute(_run_ops.mark_needs_attention(self, run_id, reason, detail))

    def set_run_status(self, run_id: str, status: str, *, reason: str | None = None) -> Run:
        """Move a run along its lifecycle (a held run leaves only by decision or ending)."""
        return self.execute(_run_ops.set_run_status(self, run_id, status, reason))

    def note_recovery_attempt(self, run_id: str) -> Run:
        """Count one recovery attempt on an active run (to park runs that keep crashing)."""
        return self.execute(_run_ops.note_recovery_attempt(self, run_id))

    def contexts_with_runs(self, context_ids: Iterable[str]) -> set[str]:
        """Which of these chats still have a run (retention removes a chat's finished runs:
        a chat with none left is gone)."""
        return self.execute(_run_ops.contexts_with_runs(context_ids))

    def delete_run(self, run_id: str) -> None:
        """Remove a finished run with its calls, checkpoints, decisions, events and input ids."""
        return self.execute(_run_ops.delete_run(run_id))

    # decisions and retry grants
    def decide(
        self,
        run_id: str,
        decision: str,
        *,
        version: int,
        actor: str,
        note: str | None = None,
        call_id: str | None = None,
    ) -> DecisionOutcome:
        """Apply a person's decision made on ``version`` of a run (see docs/durability.md)."""
        return self.execute(_run_ops.decide(self, run_id, decision, version, actor, note, call_id))

    def list_decisions(self, run_id: str) -> list[Decision]:
        return self.execute(_run_ops.list_decisions(run_id))

    def grant_retries(self, run_id: str, attempts: int, *, actor: str) -> RetryGrant:
        """Allow ``attempts`` more retries of failed calls in this run."""
        return self.execute(_run_ops.grant_retries(self, run_id, attempts, actor))

    def consume_retry(self, run_id: str, *, call_id: str | None = None) -> bool:
        """Use one granted retry; False when none is left. With ``call_id`` (a failed call),
        that call is superseded so the next intent at its position is attempt + 1."""
        return self.execute(_run_ops.consume_retry(self, run_id, call_id))

    def list_retry_grants(self, run_id: str) -> list[RetryGrant]:
        return self.execute(_run_ops.list_retry_grants(run_id))

    # documents and conflicts
    def read_document(self, context_id: str, kind: str = documents.PLAN_KIND) -> Document:
        """The document and its revision (0 and the empty value when never written)."""
        return self.execute(_documents.read_document(context_id, kind))

    def replace_document(
        self, context_id: str, kind: str, value: Any, *, expected_revision: int, actor: str
    ) -> Document:
        """Replace the whole document on ``expected_revision``; a stale revision records a
        conflict and raises DocumentConflict."""
        return self.execute(
            _documents.replace_document(self, context_id, kind, value, expected_revision, actor)
        )

    def list_conflicts(
        self, context_id: str | None = None, *, unresolved_only: bool = True
    ) -> list[Conflict]:
        return self.execute(_documents.list_conflicts(context_id, unresolved_only))

    def get_conflict(self, conflict_id: int) -> Conflict:
        """One document conflict, resolved or not (ConflictNotFound when unknown)."""
        return self.execute(_documents.get_conflict(conflict_id))

    def resolve_conflict(self, conflict_id: int, *, resolution: str, actor: str) -> Conflict:
        """Mark a document conflict resolved (``resolution``: e.g. kept_current, applied)."""
        return self.execute(_documents.resolve_conflict(self, conflict_id, resolution, actor))

    # scheduled tasks (durability/schedules.py; the scheduler is python/helpers/scheduler.py)
    def create_task(
        self, task_id: str, definition: Any, *, actor: str, done_until: float
    ) -> schedules.ScheduledTask:
        """Store a new task at revision 1 (the same id and definition again returns it;
        another definition raises TaskExists). Slots at or before ``done_until`` never fire."""
        return self.execute(_tasks.create_task(self, task_id, definition, actor, done_until))

    def get_task(self, task_id: str) -> schedules.ScheduledTask:
        """One task (TaskNotFound when unknown); a damaged one comes back with ``damage``."""
        return self.execute(_tasks.get_task(task_id))

    def list_tasks(self) -> list[schedules.ScheduledTask]:
        """Every task, oldest first; damaged ones are listed with ``damage`` set."""
        return self.execute(_tasks.list_tasks())

    def update_task(
        self,
        task_id: str,
        definition: Any,
        *,
        expected_revision: int,
        actor: str,
        done_until: float | None = None,
    ) -> schedules.ScheduledTask:
        """Replace the definition on ``expected_revision`` (TaskConflict when stale; the
        same definition again is a no-op). ``done_until`` moves the handled-slots mark
        forward, e.g. to now when the schedule changed."""
        plan = _tasks.update_task(self, task_id, definition, expected_revision, actor, done_until)
        return self.execute(plan)

    def delete_task(self, task_id: str, *, expected_revision: int | None = None) -> None:
        """Remove a task (its chat and runs stay); with ``expected_revision``, only when
        the task is still at that revision (else TaskConflict)."""
        self.execute(_tasks.delete_task(task_id, expected_revision))

    def record_task_firing(
        self, task_id: str, *, slot: float | None, input_id: str, run_id: str | None
    ) -> schedules.ScheduledTask:
        """The task fired ``input_id`` (run ``run_id``); a ``slot`` (None for a manual run)
        is handled from now on. The revision does not change."""
        return self.execute(_tasks.record_task_firing(self, task_id, slot, input_id, run_id))

    def record_task_skip(
        self, task_id: str, *, slot: float, reason: str, detail: Any = None
    ) -> schedules.ScheduledTask:
        """The slot is handled without a firing, for ``reason`` (e.g. run_held)."""
        return self.execute(_tasks.record_task_skip(self, task_id, slot, reason, detail))

    # blobs and events
    def put_blob(self, data: bytes) -> str:
        """Store bytes once under their SHA-256 (UTF-8 text is masked first)."""
        return self.execute(_documents.put_blob(self, data))

    def get_blob(self, blob_hash: str) -> bytes:
        return self.execute(_documents.get_blob(blob_hash))

    def append_event(
        self, context_id: str, type: str, payload: Any = None, *, run_id: str | None = None
    ) -> Event:
        return self.execute(_documents.append_event(self, context_id, type, payload, run_id))

    def list_events(
        self,
        *,
        context_id: str | None = None,
        run_id: str | None = None,
        after_id: int = 0,
        limit: int = 1000,
        verify: bool = True,
    ) -> list[Event]:
        """Events, oldest first. With ``verify`` (the default) a damaged payload among them
        raises CorruptRecord; without it (listings, exports) it is returned as stored."""
        return self.execute(_documents.list_events(context_id, run_id, after_id, limit, verify))

    def verify_records(self) -> integrity.RecordsReport:
        """Check every call, event, document and each run's latest checkpoint against its
        digest (any backend; ``python -m durability verify`` checks a SQLite file)."""
        return self.execute(_documents.verify_records())
