"""scheduler: upstream's task tool (list, find, show, run, delete, create, wait).

Tasks live in the journal. The tool reaches the process's scheduler through its chat's
session (``session.scheduler``, typed by python/helpers/scheduler.py; the implementation is
python/durable/scheduler.py). Not on the safe-replay allowlist: creating, running and
deleting tasks are effects, so an interrupted call is held for a person like any other.
Identity comes from the journal, never from the model: a task this tool creates is named
after the call (the same call run again finds its task instead of making a second one),
and a manual run is keyed by the call (the same call run again gets the recorded run).
Every refusal is a message to the agent with a stable code.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from durability.errors import DurabilityError
from python.helpers import scheduler_tasks
from python.helpers.errors import DomainError
from python.helpers.scheduler import TaskOrigin, TaskScheduler
from python.helpers.tool import Response, Tool, ToolArgsError, dumps, refusal_text

METHODS = (
    "list_tasks",
    "find_task_by_name",
    "show_task",
    "run_task",
    "delete_task",
    "create_scheduled_task",
    "create_adhoc_task",
    "create_planned_task",
    "wait_for_task",
)
WAIT_DEFAULT = 600.0
WAIT_MAX = 3600.0
WAIT_STEP = 1.0
_TASK_NAMESPACE = uuid.UUID("6f1c8e52-3b7d-4c1a-9a55-0d3e4b2f7a10")
#: What the listing shows of each task (the full task is show_task's).
_BRIEF = ("uuid", "name", "type", "state", "last_run", "last_status", "next_run", "context_id")
#: What wait_for_task answers about the task it waited for.
_WAITED = ("uuid", "name", "state", "last_status", "last_result", "last_run", "last_run_id")
#: The task fields a create_* call takes from its arguments (with ``kind``).
_CREATE_FIELDS = {"name", "system_prompt", "prompt", "attachments", "schedule", "plan"}
_CREATE_FIELDS |= {"timezone", "dedicated_context"}


class SchedulerArgsError(ToolArgsError):
    pass


def refusal(code: str, message: str) -> str:
    return refusal_text("scheduler", code, message)


class Scheduler(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        method = (self.method or str(self.args.get("method") or "")).strip()
        try:
            if method not in METHODS:
                raise SchedulerArgsError(
                    "invalid_method", f"use scheduler:<method>, one of {', '.join(METHODS)}"
                )
            scheduler = self.agent.context.session.scheduler
            text = await getattr(self, f"_{method}")(scheduler)
        except SchedulerArgsError as e:
            text = refusal(e.code, str(e))
        except DomainError as e:
            text = refusal(e.code, e.message)
        except DurabilityError as e:
            field = e.fields.get("field")
            text = refusal(e.code, f"{e.message}" + (f" (field {field})" if field else ""))
        return Response(message=self.agent.mask(text), break_loop=False)

    # arguments --------------------------------------------------------------------------
    def _arg(self, key: str, *, required: bool = True) -> str:
        value = self.args.get(key)
        if value in (None, "") and key == "uuid":
            value = self.args.get("task_id")
        if value in (None, ""):
            if required:
                raise SchedulerArgsError("invalid_argument", f'"{key}" is required')
            return ""
        if not isinstance(value, str):
            raise SchedulerArgsError("invalid_argument", f'"{key}" must be text')
        return value.strip()

    @property
    def _actor(self) -> str:
        return f"agent{self.agent.number}"

    def _call_key(self) -> str | None:
        return self.call_identity[0] if self.call_identity else None

    def _new_task_id(self) -> str | None:
        key = self._call_key()
        return str(uuid.uuid5(_TASK_NAMESPACE, key)) if key else None

    # methods ----------------------------------------------------------------------------
    async def _list_tasks(self, scheduler: TaskScheduler) -> str:
        filters = scheduler_tasks.Filters.of(self.args)
        views = await scheduler.list_tasks()
        now = scheduler.clock()
        wanted = [v for v in views if scheduler_tasks.matches(v, filters, now)]
        return dumps([{k: v.get(k) for k in _BRIEF} for v in wanted])

    async def _find_task_by_name(self, scheduler: TaskScheduler) -> str:
        name = self._arg("name")
        found = scheduler_tasks.find_by_name(await scheduler.list_tasks(), name)
        if not found:
            return refusal("task_not_found", f"no task named {name!r}")
        return dumps([{k: v.get(k) for k in _BRIEF} for v in found])

    async def _show_task(self, scheduler: TaskScheduler) -> str:
        return dumps(await scheduler.get(self._arg("uuid"), with_result=True))

    async def _run_task(self, scheduler: TaskScheduler) -> str:
        task_id = self._arg("uuid")
        extra = self._arg("context", required=False)
        firing = await scheduler.run_now(task_id, key=self._call_key(), extra_text=extra)
        return dumps({"firing": firing.to_dict(), "task": await scheduler.get(task_id)})

    async def _delete_task(self, scheduler: TaskScheduler) -> str:
        task_id = self._arg("uuid")
        await scheduler.delete(task_id)
        return dumps({"deleted": task_id})

    async def _create(self, scheduler: TaskScheduler, kind: str) -> str:
        fields = {k: v for k, v in self.args.items() if k in _CREATE_FIELDS}
        fields["kind"] = kind
        origin = TaskOrigin(self._actor, self._new_task_id(), self.agent.context.id)
        task = await scheduler.create(fields, origin)
        return dumps(task)

    async def _create_scheduled_task(self, scheduler: TaskScheduler) -> str:
        return await self._create(scheduler, "scheduled")

    async def _create_adhoc_task(self, scheduler: TaskScheduler) -> str:
        return await self._create(scheduler, "adhoc")

    async def _create_planned_task(self, scheduler: TaskScheduler) -> str:
        return await self._create(scheduler, "planned")

    async def _wait_for_task(self, scheduler: TaskScheduler) -> str:
        task_id = self._arg("uuid")
        timeout = _seconds(self.args.get("timeout"), WAIT_DEFAULT)
        task = await scheduler.get(task_id)
        if task.get("context_id") == self.agent.context.id:
            return refusal(
                "task_in_this_chat",
                "the task runs in this chat, which is busy with you: it cannot finish while "
                "you wait. Answer first; the task runs when this chat is idle.",
            )
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while task.get("state") == scheduler_tasks.TaskState.RUNNING and loop.time() < end:
            self.set_progress(f"Waiting for task {task.get('name')!r} to finish.")
            await self.agent.handle_intervention()
            await asyncio.sleep(WAIT_STEP)
            task = await scheduler.get(task_id)
        self.set_progress("")
        task = await scheduler.get(task_id, with_result=True)
        if task.get("state") == scheduler_tasks.TaskState.RUNNING:
            return refusal("still_running", f"the task is still running after {timeout:g} s")
        return dumps({k: task.get(k) for k in (*_WAITED, "context_id")})


def _seconds(value: Any, default: float) -> float:
    if value in (None, ""):
        return default
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise SchedulerArgsError("invalid_argument", '"timeout" must be seconds') from None
    if not 0 < seconds <= WAIT_MAX:
        raise SchedulerArgsError("invalid_argument", f'"timeout" must be 1 to {WAIT_MAX:g} s')
    return seconds
