"""The scheduler: tasks kept in the journal, and the loop that fires their slots.

A firing is an input whose id is derived from the task and the slot
(``sched:<task id>:<slot, ISO 8601 UTC>``; a manual run ``sched:<task id>:run:<key>``),
admitted through the process's one way in for a message, ``DurableChats.submit``. The
journal's admission is idempotent, so a slot handled again after a restart (the process
died between the admission and the bookkeeping) returns the recorded run and starts
nothing. The bookkeeping (``done_until``) then moves past the slot.

Each tick fires, per enabled task, only the latest slot that is due and past
``done_until``: slots missed while the server was down fire once, not once each. A task
whose chat is working waits (the slot stays due and is retried every ``DEFER_SECONDS``); a
chat whose run is held for a decision skips the slot (recorded as ``last_skip``). A task's
state is read from its latest firing's run, never stored, so nothing can leave a task stuck
in an error state (docs/scheduler.md, "The state machine").

Every ``DurableChats`` has one (``chats.scheduler``); the server starts its loop after
recovery (``Runtime.start``) and ``DurableChats.close`` stops it. Sessions expose it to the
scheduler tool as ``session.scheduler`` (the ``TaskScheduler`` Protocol of
python/helpers/scheduler.py). ``A0_SCHEDULER_CLOCK_OFFSET`` (seconds, test-only) shifts
the scheduler's clock, so that tests can put a slot a few seconds ahead and restart the
server around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agent import UserMessage
from durability import failpoints, paths
from durability.errors import (
    ActiveRunExists,
    DurabilityError,
    InputConflict,
    RunHeld,
    RunNotFound,
    TaskInvalid,
)
from durability.status import RunStatus
from python.durable.admission import Admitted, Submission, SubmitOptions, recorded_response
from python.helpers import files
from python.helpers import scheduler_tasks as tasks
from python.helpers import scheduler_time as stime
from python.helpers.errors import ShuttingDown, TaskBusy
from python.helpers.scheduler import Firing, FiringKind, TaskOrigin

if TYPE_CHECKING:  # pragma: no cover
    from durability import Journal
    from durability.schedules import ScheduledTask
    from python.durable.ports import Chats

logger = logging.getLogger("a0.scheduler")

CLOCK_OFFSET_ENV = "A0_SCHEDULER_CLOCK_OFFSET"
MAX_SLEEP = 30.0  # the loop looks at least this often (wall-clock jumps, edits elsewhere)
DEFER_SECONDS = 2.0  # a task waiting for its busy chat is tried again this often
FAILPOINT = "scheduler.after_admit"  # crash tests: between the admission and the bookkeeping


def clock_offset(environ: Mapping[str, str] | None = None) -> float:
    """The test-only shift of the scheduler's clock (``A0_SCHEDULER_CLOCK_OFFSET``)."""
    raw = (environ if environ is not None else os.environ).get(CLOCK_OFFSET_ENV, "")
    if not raw.strip():
        return 0.0
    try:
        return float(raw)
    except ValueError:
        logger.warning("%s=%r is not a number of seconds; ignored", CLOCK_OFFSET_ENV, raw)
        return 0.0


def firing_input_id(task_id: str, slot: float | None = None, key: str | None = None) -> str:
    if slot is not None:
        return f"sched:{task_id}:{stime.iso(slot)}"
    return f"sched:{task_id}:run:{key}"


def firing_message(definition: Mapping[str, Any], input_id: str, extra_text: str) -> UserMessage:
    """The firing's user message (upstream: the task's prompt, with its system prompt)."""
    prompt = str(definition.get("prompt") or "")
    text = f"{prompt}\n\n{extra_text}" if extra_text.strip() else prompt
    system_prompt = str(definition.get("system_prompt") or "")
    system = [system_prompt] if system_prompt.strip() else []
    attachments = [str(a) for a in definition.get("attachments") or []]
    return UserMessage(text, attachments, system_message=system, id=input_id)


class Scheduler:
    """The scheduler of one process's chats (``chats.scheduler``): the firing loop and
    the tasks, whose methods raise the journal's errors (task_not_found, ...)."""

    def __init__(
        self,
        chats: Chats,
        *,
        clock: Callable[[], float] | None = None,
        default_timezone: str = tasks.DEFAULT_TIMEZONE,
    ) -> None:
        self.chats = chats
        offset = clock_offset()
        self.clock: Callable[[], float] = clock or (lambda: time.time() + offset)
        self.default_timezone = default_timezone
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._loop_task: asyncio.Task[None] | None = None

    @property
    def journal(self) -> Journal:
        return self.chats.journal

    # the loop -------------------------------------------------------------------------
    def start(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._run(), name="scheduler")

    async def stop(self) -> None:
        task, self._loop_task = self._loop_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def wake(self) -> None:
        """Look at the tasks now (after an edit, or for scheduler_tick)."""
        self._wake.set()

    async def _run(self) -> None:
        while not self.chats.stopping:
            self._wake.clear()
            try:
                _, wait = await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one bad tick never ends the loop
                code = exc.code if isinstance(exc, DurabilityError) else type(exc).__name__
                logger.warning("scheduler tick failed: %s", code)
                wait = DEFER_SECONDS
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=wait)

    async def tick(self) -> tuple[list[Firing], float]:
        """Fire every due slot once; returns what happened and how long to sleep."""
        async with self._lock:
            now = self.clock()
            wake_at = now + MAX_SLEEP
            firings = []
            for task in await self.journal.aio.list_tasks():
                definition = task.definition
                if task.damage is not None or not isinstance(definition, dict):
                    continue  # a damaged task is listed, never fired
                if not definition.get("enabled", True) or definition.get("kind") == "adhoc":
                    continue
                try:
                    slots = tasks.Slots.of(definition)
                except TaskInvalid as exc:
                    logger.warning("task %s cannot fire: %s", task.id, exc.message)
                    continue
                due = slots.due(now, task.done_until)
                if due is not None:
                    firing = await self._fire_slot(task, definition, due)
                    firings.append(firing)
                    if firing.kind in (FiringKind.DEFERRED, FiringKind.FAILED):
                        wake_at = min(wake_at, now + DEFER_SECONDS)
                upcoming = slots.next(max(now, task.done_until, due or 0.0))
                if upcoming is not None:
                    wake_at = min(wake_at, upcoming)
            return firings, max(0.05, wake_at - self.clock())

    async def _fire_slot(
        self, task: ScheduledTask, definition: dict[str, Any], slot: float
    ) -> Firing:
        try:
            return await self._fire(task, definition, slot=slot)
        except DurabilityError as exc:  # e.g. deleted meanwhile: the other tasks go on
            logger.warning("task %s not fired: %s", task.id, exc.code)
            input_id = firing_input_id(task.id, slot)
            return Firing(task.id, FiringKind.FAILED, input_id, stime.iso(slot), reason=exc.code)

    # firing ---------------------------------------------------------------------------
    async def _fire(
        self,
        task: ScheduledTask,
        definition: dict[str, Any],
        *,
        slot: float | None,
        key: str | None = None,
        extra_text: str = "",
    ) -> Firing:
        """Fire one slot (or a manual run with ``key``). Scheduled slots wait or skip when
        the chat cannot take them; a manual run raises instead (the caller is a person or
        an agent who should know)."""
        chat_id = str(definition["context_id"])
        input_id = firing_input_id(task.id, slot, key)
        firing = Firing(task.id, "", input_id, stime.iso(slot), context_id=chat_id)
        manual = slot is None
        open_run = await self.journal.aio.active_run(chat_id)
        if open_run is not None and open_run.input_id == input_id:
            return await self._recorded(task, firing, slot, open_run.id, FiringKind.RECORDED)
        # An input id admitted before goes to the admission whatever the chat does: the
        # journal returns its recorded run and nothing starts or intervenes.
        known = await self.journal.aio.input_context(input_id) is not None
        if not known and self._chat_working(chat_id):
            if manual:
                raise TaskBusy("The task's chat is working; run it later.")
            return _with(firing, FiringKind.DEFERRED, reason="chat_busy")
        if open_run is not None and not known:
            held = open_run.status == RunStatus.NEEDS_ATTENTION
            if manual and held:
                why = "The task's chat has a run waiting for a decision (Recovery)."
                raise RunHeld(why)
            if manual:
                raise TaskBusy("The task's chat has an open run; run it later.")
            if held:
                return await self._skip(task, firing, slot, open_run.id)
            return _with(firing, FiringKind.DEFERRED, reason="run_pending", run_id=open_run.id)
        if self.chats.stopping:
            if manual:
                raise ShuttingDown("The server is shutting down.")
            return _with(firing, FiringKind.DEFERRED, reason="shutting_down")
        message = firing_message(definition, input_id, extra_text)
        name = str(definition.get("name") or task.id)
        try:
            admitted = await self._admit(chat_id, message, name)
        except InputConflict as exc:  # fired before with another definition: it is done
            return await self._recorded(
                task, firing, slot, exc.fields.get("run_id"), Admitted.DUPLICATE
            )
        except RunHeld as exc:
            if manual:
                raise
            return await self._skip(task, firing, slot, exc.fields.get("run_id"))
        except ActiveRunExists as exc:
            if manual:
                raise
            run_id = exc.fields.get("run_id")
            return _with(firing, FiringKind.DEFERRED, reason="run_pending", run_id=run_id)
        except DurabilityError as exc:
            if manual:
                raise
            logger.warning("task %s slot %s not fired: %s", task.id, firing.slot, exc.code)
            return _with(firing, FiringKind.FAILED, reason=exc.code)
        failpoints.failpoint(FAILPOINT, "scheduler", paths.state_dir(files.usr_dir()))
        firing = _with(firing, admitted.kind, run_id=admitted.run_id)
        firing.context_id = admitted.context_id or chat_id
        await self.journal.aio.record_task_firing(
            task.id, slot=slot, input_id=input_id, run_id=admitted.run_id
        )
        logger.info("task %s fired %s: %s run %s", task.id, input_id, firing.kind, firing.run_id)
        return firing

    def _chat_working(self, chat_id: str) -> bool:
        context = self.chats.get(chat_id)
        return context is not None and context.is_running()

    async def _admit(self, chat_id: str, message: UserMessage, name: str) -> Submission:
        """The firing's message into the chat ``chat_id`` (a new chat named ``name`` when
        it is not loaded, made only once the journal took the input) through the one
        entry point; shown in the chat's log like a person's message."""
        context, submission = await self.chats.submit(chat_id, message, SubmitOptions(create=name))
        if context is not None and submission.kind != Admitted.DUPLICATE:
            kvps = {"task": name, "input_id": message.id}
            text = message.message
            context.log.log(
                type="user", heading="Scheduled task", content=text, kvps=kvps, id=message.id
            )
        return submission

    async def _recorded(
        self, task: ScheduledTask, firing: Firing, slot: float | None, run_id: Any, kind: str
    ) -> Firing:
        await self.journal.aio.record_task_firing(
            task.id, slot=slot, input_id=firing.input_id, run_id=run_id
        )
        return _with(firing, kind, run_id=run_id)

    async def _skip(
        self, task: ScheduledTask, firing: Firing, slot: float | None, run_id: Any
    ) -> Firing:
        assert slot is not None
        await self.journal.aio.record_task_skip(
            task.id, slot=slot, reason="run_held", detail={"run_id": run_id}
        )
        logger.info("task %s skipped %s: its chat's run is held", task.id, firing.slot)
        return _with(firing, FiringKind.SKIPPED, reason="run_held", run_id=run_id)

    async def run_now(
        self, task_id: str, *, key: str | None = None, extra_text: str = ""
    ) -> Firing:
        """Fire the task now, whatever its kind and schedule (``key`` names the manual run:
        the same key again is the same run; ``extra_text`` is added below the prompt)."""
        async with self._lock:
            task = await self.journal.aio.get_task(task_id)
            if task.damage is not None or not isinstance(task.definition, dict):
                raise TaskInvalid("the task is damaged; replace or delete it", field="task")
            run_key = key or stime.iso(self.clock()) or uuid.uuid4().hex
            return await self._fire(
                task, task.definition, slot=None, key=run_key, extra_text=extra_text
            )

    # tasks ----------------------------------------------------------------------------
    async def create(self, data: Mapping[str, Any], origin: TaskOrigin) -> dict[str, Any]:
        task_id = origin.task_id or str(uuid.uuid4())
        definition = tasks.normalise(
            data,
            default_timezone=self.default_timezone,
            default_context=origin.default_context,
            task_id=task_id,
        )
        task = await self.journal.aio.create_task(
            task_id, definition, actor=origin.actor, done_until=self.clock()
        )
        self.wake()
        return await self.describe(task)

    async def update(
        self, task_id: str, changes: Mapping[str, Any], *, expected_revision: int, actor: str
    ) -> dict[str, Any]:
        current = await self.journal.aio.get_task(task_id)
        base = current.definition if current.damage is None else {}
        merged = tasks.merge(base, changes)
        definition = tasks.normalise(
            merged, default_timezone=self.default_timezone, task_id=task_id
        )
        moved = self.clock() if tasks.schedule_changed(base, definition) else None
        revision = expected_revision
        task = await self.journal.aio.update_task(
            task_id, definition, expected_revision=revision, actor=actor, done_until=moved
        )
        self.wake()
        return await self.describe(task)

    async def delete(self, task_id: str, *, expected_revision: int | None = None) -> None:
        await self.journal.aio.delete_task(task_id, expected_revision=expected_revision)
        self.wake()

    async def get(self, task_id: str, *, with_result: bool = False) -> dict[str, Any]:
        task = await self.journal.aio.get_task(task_id)
        shown = await self.describe(task)
        if with_result:
            shown["last_result"] = await self.last_result(task.last_run_id)
        return shown

    async def list_tasks(self) -> list[dict[str, Any]]:
        """Every task as the API and the tool show it (state, last and next run)."""
        return await asyncio.to_thread(self._list_sync)

    def _list_sync(self) -> list[dict[str, Any]]:
        journal, now = self.journal, self.clock()
        found = journal.list_tasks()
        return [tasks.view(t, _run_status(journal, t.last_run_id), now) for t in found]

    async def describe(self, task: ScheduledTask) -> dict[str, Any]:
        status = await asyncio.to_thread(_run_status, self.journal, task.last_run_id)
        return tasks.view(task, status, self.clock())

    async def last_result(self, run_id: str | None) -> str | None:
        """The final answer journaled for a finished run (None while it runs, when held,
        or when it ended without one)."""
        if not run_id:
            return None
        return await asyncio.to_thread(recorded_response, self.journal, run_id)


def _run_status(journal: Journal, run_id: str | None) -> str | None:
    if not run_id:
        return None
    try:
        return str(journal.get_run(run_id).status)
    except RunNotFound:  # retention removed it
        return None


def _with(firing: Firing, kind: str, **changes: Any) -> Firing:
    firing.kind = kind
    for key, value in changes.items():
        setattr(firing, key, value)
    return firing
