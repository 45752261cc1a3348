"""POST /api/scheduler_task_update: change a task on the revision it was read at."""

from __future__ import annotations

from typing import Any

from python.api._scheduler import ACTOR, revision_of, scheduler_of, task_fields, task_id_of
from python.server.api import ApiHandler


class SchedulerTaskUpdate(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        scheduler = scheduler_of(self.runtime)
        task_id = task_id_of(input)
        revision = revision_of(input, required=True)
        assert revision is not None
        task = await scheduler.update(
            task_id, task_fields(input), expected_revision=revision, actor=ACTOR
        )
        return {"ok": True, "task": task}
