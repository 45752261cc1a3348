"""The journal's asynchronous facade: ``await journal.aio.<method>(...)``.

Every method of Journal that reads or writes has its twin here, with the same arguments.
A write on an engine with native asynchronous writes (SQLite's group-commit writer) is
prepared on the event loop (argument checks, masking, canonical JSON: microseconds for the
calls the loop makes) and handed to the store's writer as a transaction; the loop is never
blocked on the disk and no thread is taken per call. A call whose payload is large (long
text, many containers: see ``_validation.is_light``) is prepared in the journal's pool
instead, so the loop stays responsive. Reads, and writes on other engines (PostgreSQL's
blocking driver, or a shared worker's fenced writes), run whole in the journal's own
thread pool (``Journal.async_workers`` threads, started as needed): unlike asyncio's
default pool (``min(32, cores + 4)`` threads) it is sized for every run to have a call in
flight.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from durability import documents, integrity, schedules
from durability.journal import (
    _admission,
    _calls,
    _chats,
    _checkpoints,
    _documents,
    _run_ops,
    _tasks,
)
from durability.journal._checkpoints import HistoryKeys
from durability.journal._plan import Plan
from durability.journal._validation import is_light
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
    NewChat,
    RetryGrant,
    Run,
    RunDetail,
)

if TYPE_CHECKING:  # pragma: no cover
    from durability.journal._core import Journal

T = TypeVar("T")


class AsyncJournal:
    """``await journal.aio.admit(...)``: the journal's methods for code on an event loop."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal

    @property
    def journal(self) -> Journal:
        return self._journal

    async def _execute(self, plan: Plan[T]) -> T:
        journal = self._journal
        if plan.write and journal.writes_natively_async():
            value = await journal.store.write_async(journal.write_op(plan))
            return plan.after(value) if plan.after is not None else value
        if not plan.write:
            await journal.store.flush_async()  # a read sees every write handed over before it
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(journal.executor(), journal.execute, plan)

    async def _built(self, light: bool, build: Callable[[], Plan[T]]) -> Plan[T]:
        """Build the plan on the loop when that is cheap, else in the journal's pool."""
        if light:
            return build()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._journal.executor(), build)

    async def _prepared(self, light: bool, build: Callable[[], Plan[T]]) -> T:
        return await self._execute(await self._built(light, build))

    # admit
    async def admit(
        self, context_id: str, input_id: str, content_digest: str, *, message: Any = None
    ) -> Admission:
        build = functools.partial(
            _admission.admit, self._journal, context_id, input_id, content_digest, message, "run"
        )
        return await self._prepared(is_light(message), build)

    async def admit_intervention(
        self, context_id: str, input_id: str, content_digest: str, *, message: Any = None
    ) -> Admission:
        build = functools.partial(
            _admission.admit,
            self._journal,
            context_id,
            input_id,
            content_digest,
            message,
            "intervention",
        )
        return await self._prepared(is_light(message), build)

    async def input_context(self, input_id: str) -> str | None:
        return await self._execute(_admission.input_context(input_id))

    # calls
    async def record_intent(
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
        build = functools.partial(
            _calls.record_intent, self._journal, run_id, agent_no, seq, kind, name, args, policy
        )
        return await self._prepared(is_light(args), build)

    async def commit_result(
        self,
        call_id: str,
        result: Any,
        *,
        failed: bool = False,
        checkpoint: CheckpointData | None = None,
    ) -> Call:
        build = functools.partial(
            _calls.commit_result, self._journal, call_id, result, failed, checkpoint
        )
        return await self._prepared(is_light(result), build)

    async def defer_result(
        self,
        call_id: str,
        result: Any,
        *,
        failed: bool = False,
        checkpoint: CheckpointData | None = None,
    ) -> bool:
        """``commit_result`` without waiting when the call's policy allows it (True: it
        rides on the run's next write), else awaited at once (False)."""
        journal = self._journal
        run_id = journal.deferrals.calls.pop(call_id, None)
        if run_id is None:
            await self.commit_result(call_id, result, failed=failed, checkpoint=checkpoint)
            return False
        build = functools.partial(
            _calls.commit_result, journal, call_id, result, failed, checkpoint
        )
        plan = await self._built(is_light(result), build)
        journal.deferrals.defer(plan, run_id)
        return True

    async def record_chats(self, chats: Sequence[NewChat]) -> list[Run]:
        build = functools.partial(_chats.record_chats, self._journal, chats)
        return await self._prepared(False, build)

    async def defer_checkpoint(self, run_id: str, data: CheckpointData) -> bool:
        """``write_checkpoint`` without waiting (True), or awaited where the engine does not
        defer (False)."""
        journal = self._journal
        plan = _checkpoints.write_checkpoint(journal, run_id, data)
        if not journal.deferrals.enabled:
            await self._execute(plan)
            return False
        journal.deferrals.defer(plan, run_id)
        return True

    async def flush(self) -> None:
        """Return once every write deferred so far is committed (or refused)."""
        await self._journal.store.flush_async()

    async def get_call(self, call_id: str) -> Call:
        return await self._execute(_calls.get_call(call_id))

    async def list_calls(
        self, run_id: str, *, from_seq: Mapping[int, int] | None = None
    ) -> list[Call]:
        return await self._execute(_calls.list_calls(run_id, None, from_seq))

    async def open_intents(self, run_id: str) -> list[Call]:
        return await self._execute(_calls.list_calls(run_id, ["open"]))

    # checkpoints
    async def write_checkpoint(self, run_id: str, data: CheckpointData) -> CheckpointRef:
        return await self._execute(_checkpoints.write_checkpoint(self._journal, run_id, data))

    async def latest_checkpoint(
        self, run_id: str, *, histories: HistoryKeys = None
    ) -> Checkpoint | None:
        return await self._execute(_checkpoints.latest_checkpoint(run_id, histories))

    async def latest_context_checkpoint(
        self, context_id: str, *, histories: HistoryKeys = None
    ) -> Checkpoint | None:
        return await self._execute(_checkpoints.latest_context_checkpoint(context_id, histories))

    # runs
    async def get_run(self, run_id: str) -> Run:
        return await self._execute(_run_ops.get_run(run_id))

    async def read_run(self, run_id: str) -> RunDetail:
        return await self._execute(_run_ops.read_run(run_id))

    async def list_runs(
        self,
        status: str | Iterable[str] | None = None,
        *,
        context_id: str | None = None,
        limit: int = 100,
    ) -> list[Run]:
        return await self._execute(_run_ops.list_runs(status, context_id, limit))

    async def list_nonterminal_runs(self, limit: int = 100_000) -> list[Run]:
        return await self.list_runs(OPEN_RUN_STATUSES, limit=limit)

    async def active_run(self, context_id: str) -> Run | None:
        return await self._execute(_run_ops.active_run(context_id))

    async def mark_needs_attention(self, run_id: str, reason: str, detail: Any = None) -> Run:
        build = functools.partial(
            _run_ops.mark_needs_attention, self._journal, run_id, reason, detail
        )
        return await self._prepared(is_light(detail), build)

    async def set_run_status(self, run_id: str, status: str, *, reason: str | None = None) -> Run:
        return await self._execute(_run_ops.set_run_status(self._journal, run_id, status, reason))

    async def note_recovery_attempt(self, run_id: str) -> Run:
        return await self._execute(_run_ops.note_recovery_attempt(self._journal, run_id))

    async def contexts_with_runs(self, context_ids: Iterable[str]) -> set[str]:
        return await self._execute(_run_ops.contexts_with_runs(context_ids))

    async def delete_run(self, run_id: str) -> None:
        return await self._execute(_run_ops.delete_run(run_id))

    # decisions and retry grants
    async def decide(
        self,
        run_id: str,
        decision: str,
        *,
        version: int,
        actor: str,
        note: str | None = None,
        call_id: str | None = None,
    ) -> DecisionOutcome:
        plan = _run_ops.decide(self._journal, run_id, decision, version, actor, note, call_id)
        return await self._execute(plan)

    async def list_decisions(self, run_id: str) -> list[Decision]:
        return await self._execute(_run_ops.list_decisions(run_id))

    async def grant_retries(self, run_id: str, attempts: int, *, actor: str) -> RetryGrant:
        return await self._execute(_run_ops.grant_retries(self._journal, run_id, attempts, actor))

    async def consume_retry(self, run_id: str, *, call_id: str | None = None) -> bool:
        return await self._execute(_run_ops.consume_retry(self._journal, run_id, call_id))

    async def list_retry_grants(self, run_id: str) -> list[RetryGrant]:
        return await self._execute(_run_ops.list_retry_grants(run_id))

    # documents and conflicts
    async def read_document(self, context_id: str, kind: str = documents.PLAN_KIND) -> Document:
        return await self._execute(_documents.read_document(context_id, kind))

    async def replace_document(
        self, context_id: str, kind: str, value: Any, *, expected_revision: int, actor: str
    ) -> Document:
        build = functools.partial(
            _documents.replace_document,
            self._journal,
            context_id,
            kind,
            value,
            expected_revision,
            actor,
        )
        return await self._prepared(is_light(value), build)

    async def list_conflicts(
        self, context_id: str | None = None, *, unresolved_only: bool = True
    ) -> list[Conflict]:
        return await self._execute(_documents.list_conflicts(context_id, unresolved_only))

    async def get_conflict(self, conflict_id: int) -> Conflict:
        return await self._execute(_documents.get_conflict(conflict_id))

    async def resolve_conflict(self, conflict_id: int, *, resolution: str, actor: str) -> Conflict:
        plan = _documents.resolve_conflict(self._journal, conflict_id, resolution, actor)
        return await self._execute(plan)

    # scheduled tasks
    async def create_task(
        self, task_id: str, definition: Any, *, actor: str, done_until: float
    ) -> schedules.ScheduledTask:
        build = functools.partial(
            _tasks.create_task, self._journal, task_id, definition, actor, done_until
        )
        return await self._prepared(is_light(definition), build)

    async def get_task(self, task_id: str) -> schedules.ScheduledTask:
        return await self._execute(_tasks.get_task(task_id))

    async def list_tasks(self) -> list[schedules.ScheduledTask]:
        return await self._execute(_tasks.list_tasks())

    async def update_task(
        self,
        task_id: str,
        definition: Any,
        *,
        expected_revision: int,
        actor: str,
        done_until: float | None = None,
    ) -> schedules.ScheduledTask:
        build = functools.partial(
            _tasks.update_task,
            self._journal,
            task_id,
            definition,
            expected_revision,
            actor,
            done_until,
        )
        return await self._prepared(is_light(definition), build)

    async def delete_task(self, task_id: str, *, expected_revision: int | None = None) -> None:
        await self._execute(_tasks.delete_task(task_id, expected_revision))

    async def record_task_firing(
        self, task_id: str, *, slot: float | None, input_id: str, run_id: str | None
    ) -> schedules.ScheduledTask:
        plan = _tasks.record_task_firing(self._journal, task_id, slot, input_id, run_id)
        return await self._execute(plan)

    async def record_task_skip(
        self, task_id: str, *, slot: float, reason: str, detail: Any = None
    ) -> schedules.ScheduledTask:
        build = functools.partial(
            _tasks.record_task_skip, self._journal, task_id, slot, reason, detail
        )
        return await self._prepared(is_light(detail), build)

    # blobs and events
    async def put_blob(self, data: bytes) -> str:
        build = functools.partial(_documents.put_blob, self._journal, data)
        return await self._prepared(is_light(data), build)

    async def get_blob(self, blob_hash: str) -> bytes:
        return await self._execute(_documents.get_blob(blob_hash))

    async def append_event(
        self, context_id: str, type: str, payload: Any = None, *, run_id: str | None = None
    ) -> Event:
        build = functools.partial(
            _documents.append_event, self._journal, context_id, type, payload, run_id
        )
        return await self._prepared(is_light(payload), build)

    async def list_events(
        self,
        *,
        context_id: str | None = None,
        run_id: str | None = None,
        after_id: int = 0,
        limit: int = 1000,
        verify: bool = True,
    ) -> list[Event]:
        plan = _documents.list_events(context_id, run_id, after_id, limit, verify)
        return await self._execute(plan)

    async def verify_records(self) -> integrity.RecordsReport:
        return await self._execute(_documents.verify_records())

    async def integrity_check(self, full: bool = False) -> list[str]:
        loop = asyncio.get_running_loop()
        journal = self._journal
        return await loop.run_in_executor(
            journal.executor(), functools.partial(journal.integrity_check, full)
        )
