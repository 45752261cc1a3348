"""POST /api/scheduler_tasks_list: every scheduled task with its state, last and next run."""

from __future__ import annotations

from typing import Any

from python.api._scheduler import scheduler_of
from python.helpers.scheduler_tasks import Filters, matches
from python.server.api import ApiHandler


class SchedulerTasksList(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        scheduler = scheduler_of(self.runtime)
        filters = Filters.of(input)
        now = scheduler.clock()
        views = [v for v in await scheduler.list_tasks() if matches(v, filters, now)]
        return {"ok": True, "tasks": views, "now": now}
