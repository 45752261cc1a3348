"""POST /api/scheduler_task_create: a new task (scheduled, planned or ad hoc)."""

from __future__ import annotations

from typing import Any

from python.api._scheduler import ACTOR, scheduler_of, task_fields, task_id_of
from python.helpers.scheduler import TaskOrigin
from python.server.api import ApiHandler


class SchedulerTaskCreate(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        scheduler = scheduler_of(self.runtime)
        given = input.get("task_id") not in (None, "") or input.get("uuid") not in (None, "")
        task_id = task_id_of(input) if given else None  # a client's id makes a retry safe
        task = await scheduler.create(task_fields(input), TaskOrigin(ACTOR, task_id))
        return {"ok": True, "task": task}
