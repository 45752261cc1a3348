"""The scheduler: tasks kept in the journal, and the loop that fires their slots.

A firing is an input whose id is derived from the task and the slot
(``sched:<task id>:<slot, ISO 8601 UTC>``; a manual run ``sched:<task id>:run:<key>``),
admitted through the server's one admission path (python/helpers/scheduler_glue.py). The
journal's admission is idempotent, so a slot handled again after a restart (the process
died between the admission and the bookkeeping) returns the recorded run and starts
nothing. The bookkeeping (``done_until``) then moves past the slot.

Each tick fires, per enabled task, only the latest slot that is due and past
``done_until``: slots missed while the server was down fire once, not once each. A task
whose chat is working waits (the slot stays due and is retried every ``DEFER_SECONDS``); a
chat whose run is held for a decision skips the slot (recorded as ``last_skip``). A task's
state is read from its latest firing's run, never stored, so nothing can leave a task stuck
in an error state (docs/scheduler.md, "The state machine").

``A0_SCHEDULER_CLOCK_OFFSET`` (seconds, test-only) shifts the scheduler's clock, so that
tests can put a slot a few seconds ahead and restart the server around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from durability.errors import (
    ActiveRunExists,
    DurabilityError,
    InputConflict,
    RunHeld,
    RunNotFound,
    TaskInvalid,
)
from python.helpers import scheduler_glue as glue
from python.helpers import scheduler_tasks as tasks
from python.helpers import scheduler_time as stime
from python.helpers.api import ApiError

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


@dataclass
class Firing:
    """What one attempt to fire a task did."""

    task_id: str
    kind: str  # started | duplicate | intervention | recorded | deferred | skipped | failed
    input_id: str
    slot: str | None = None
    run_id: str | None = None
    context_id: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Scheduler:
    """One per server process (``Scheduler.start`` / ``stop``); the API and the tool use
    its methods, which raise journal errors (task_not_found, task_conflict, ...)."""

    def __init__(
        self,
        runtime: Any,
        *,
        clock: Callable[[], float] | None = None,
        default_timezone: str = tasks.DEFAULT_TIMEZONE,
    ) -> None:
        self.runtime = runtime
        offset = clock_offset()
        self.clock = clock or (lambda: time.time() + offset)
        self.default_timezone = default_timezone
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._loop_task: asyncio.Task | None = None

    @property
    def journal(self) -> Any:
        journal = getattr(self.runtime, "journal", None)
        if journal is None:
            raise ApiError("journal_unavailable", "Durability is off: no scheduler.", 503)
        return journal

    @property
    def state_dir(self) -> Path | None:
        usr = getattr(self.runtime, "usr", None)
        return Path(usr) / "durability" if usr is not None else None

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

    def _stopping(self) -> bool:
        return bool(getattr(self.runtime, "_stopping", False))

    async def _run(self) -> None:
        while not self._stopping():
            self._wake.clear()
            try:
                _, wait = await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one bad tick never ends the loop
                logger.warning("scheduler tick failed: %s", getattr(exc, "code", repr(exc)))
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
                    try:
                        firing = await self._fire(task, definition, slot=due)
                    except DurabilityError as exc:  # e.g. deleted meanwhile: the others go on
                        logger.warning("task %s not fired: %s", task.id, exc.code)
                        firing = Firing(
                            task.id,
                            "failed",
                            firing_input_id(task.id, due),
                            stime.iso(due),
                            reason=exc.code,
                        )
                    firings.append(firing)
                    if firing.kind in ("deferred", "failed"):
                        wake_at = min(wake_at, now + DEFER_SECONDS)
                upcoming = slots.next(max(now, task.done_until, due or 0.0))
                if upcoming is not None:
                    wake_at = min(wake_at, upcoming)
            return firings, max(0.05, wake_at - self.clock())

    # firing ---------------------------------------------------------------------------
    async def _fire(
        self,
        task: Any,
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
        journal = self.journal
        manual = slot is None
        open_run = await journal.aio.active_run(chat_id)
        if open_run is not None and open_run.input_id == input_id:
            return await self._recorded(task, firing, slot, open_run.id, "recorded")
        # An input id admitted before goes to the admission whatever the chat does: the
        # journal returns its recorded run and nothing starts or intervenes.
        known = await journal.aio.input_context(input_id) is not None
        if not known and self.runtime.is_running(chat_id):
            if manual:
                raise ApiError("task_busy", "The task's chat is working; run it later.", 409)
            return _with(firing, "deferred", reason="chat_busy")
        if open_run is not None and not known:
            held = open_run.status == "needs_attention"
            if manual:
                raise ApiError(
                    "run_held" if held else "task_busy",
                    "The task's chat has a run waiting for a decision (Recovery)."
                    if held
                    else "The task's chat has an open run; run the task later.",
                    409,
                )
            if held:
                return await self._skip(task, firing, slot, open_run.id)
            return _with(firing, "deferred", reason="run_pending", run_id=open_run.id)
        prompt = str(definition.get("prompt") or "")
        message = glue.make_message(
            f"{prompt}\n\n{extra_text}" if extra_text.strip() else prompt,
            list(definition.get("attachments") or []),
            str(definition.get("system_prompt") or ""),
            input_id,
        )
        name = str(definition.get("name") or task.id)
        try:
            admitted = await glue.admit_firing(self.runtime, chat_id, message, name)
        except InputConflict as exc:  # fired before with another definition: it is done
            return await self._recorded(task, firing, slot, exc.fields.get("run_id"), "duplicate")
        except RunHeld as exc:
            if manual:
                raise
            return await self._skip(task, firing, slot, exc.fields.get("run_id"))
        except ActiveRunExists as exc:
            if manual:
                raise
            return _with(firing, "deferred", reason="run_pending", run_id=exc.fields.get("run_id"))
        except ApiError as exc:
            if manual or exc.code != "shutting_down":
                raise
            return _with(firing, "deferred", reason="shutting_down")
        except DurabilityError as exc:
            if manual:
                raise
            logger.warning("task %s slot %s not fired: %s", task.id, firing.slot, exc.code)
            return _with(firing, "failed", reason=exc.code)
        _failpoint(self.state_dir)
        firing = _with(firing, admitted.kind, run_id=admitted.run_id)
        firing.context_id = admitted.context_id or chat_id
        await journal.aio.record_task_firing(
            task.id, slot=slot, input_id=input_id, run_id=admitted.run_id
        )
        logger.info("task %s fired %s: %s run %s", task.id, input_id, firing.kind, firing.run_id)
        return firing

    async def _recorded(
        self, task: Any, firing: Firing, slot: float | None, run_id: str | None, kind: str
    ) -> Firing:
        await self.journal.aio.record_task_firing(
            task.id, slot=slot, input_id=firing.input_id, run_id=run_id
        )
        return _with(firing, kind, run_id=run_id)

    async def _skip(self, task: Any, firing: Firing, slot: float | None, run_id: Any) -> Firing:
        assert slot is not None
        await self.journal.aio.record_task_skip(
            task.id, slot=slot, reason="run_held", detail={"run_id": run_id}
        )
        logger.info("task %s skipped %s: its chat's run is held", task.id, firing.slot)
        return _with(firing, "skipped", reason="run_held", run_id=run_id)

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
    async def create(
        self,
        data: Mapping[str, Any],
        *,
        actor: str,
        task_id: str | None = None,
        default_context: str | None = None,
    ) -> dict[str, Any]:
        task_id = task_id or str(uuid.uuid4())
        definition = tasks.normalise(
            data,
            default_timezone=self.default_timezone,
            default_context=default_context,
            task_id=task_id,
        )
        task = await self.journal.aio.create_task(
            task_id, definition, actor=actor, done_until=self.clock()
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
        task = await self.journal.aio.update_task(
            task_id,
            definition,
            expected_revision=expected_revision,
            actor=actor,
            done_until=moved,
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

    async def list(self) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self._list_sync)

    def _list_sync(self) -> list[dict[str, Any]]:
        journal = self.journal
        now = self.clock()
        return [
            tasks.view(t, _run_status(journal, t.last_run_id), now) for t in journal.list_tasks()
        ]

    async def describe(self, task: Any) -> dict[str, Any]:
        status = await asyncio.to_thread(_run_status, self.journal, task.last_run_id)
        return tasks.view(task, status, self.clock())

    async def last_result(self, run_id: str | None) -> str | None:
        if not run_id:
            return None
        return await asyncio.to_thread(glue.run_response, self.journal, run_id)


def _run_status(journal: Any, run_id: str | None) -> str | None:
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


def _failpoint(state_dir: Path | None) -> None:
    from durability.failpoints import failpoint

    failpoint(FAILPOINT, "scheduler", state_dir)


# one scheduler per server process -----------------------------------------------------
_current: Scheduler | None = None


def current() -> Scheduler | None:
    """The running server's scheduler (None without a journal, e.g. in unit tests)."""
    return _current


def for_runtime(runtime: Any) -> Scheduler:
    """The scheduler of ``runtime`` (503 journal_unavailable when there is none)."""
    scheduler = getattr(runtime, "scheduler", None)
    if scheduler is None:
        raise ApiError("journal_unavailable", "Durability is off: no scheduler.", 503)
    return scheduler


async def start(runtime: Any) -> Scheduler | None:
    """Start the firing loop once the runtime (journal and recovery) is up."""
    global _current
    if getattr(runtime, "journal", None) is None:
        return None
    scheduler = Scheduler(runtime)
    runtime.scheduler = scheduler
    _current = scheduler
    scheduler.start()
    return scheduler


async def stop(scheduler: Scheduler | None) -> None:
    global _current
    if scheduler is None:
        return
    await scheduler.stop()
    if _current is scheduler:
        _current = None
