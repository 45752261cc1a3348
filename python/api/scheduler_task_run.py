"""POST /api/scheduler_task_run: run a task now (any kind), as one more firing."""

from __future__ import annotations

from typing import Any

from python.api._scheduler import scheduler_of, task_id_of
from python.server.api import ApiHandler, bad_request, get_str


class SchedulerTaskRun(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        scheduler = scheduler_of(self.runtime)
        task_id = task_id_of(input)
        key = get_str(input, "key")
        if len(key) > 100:
            raise bad_request("'key' is at most 100 characters", field="key")
        firing = await scheduler.run_now(task_id, key=key or None)
        return {"ok": True, "firing": firing.to_dict(), "task": await scheduler.get(task_id)}
