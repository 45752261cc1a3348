"""POST /api/scheduler_task_delete: remove a task (its chat and runs stay)."""

from __future__ import annotations

from typing import Any

from python.api._scheduler import revision_of, scheduler_of, task_id_of
from python.server.api import ApiHandler


class SchedulerTaskDelete(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        scheduler = scheduler_of(self.runtime)
        task_id = task_id_of(input)
        await scheduler.delete(task_id, expected_revision=revision_of(input, required=False))
        return {"ok": True, "deleted": task_id}
