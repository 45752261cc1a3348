"""Shared pieces of the scheduler_* endpoints: the scheduler, task ids, revisions, filters."""

from __future__ import annotations

from typing import Any

from python.durable.scheduler import Scheduler
from python.server.api import bad_request, get_int, get_str
from python.server.runtime import Runtime

ACTOR = "user"  # a person, through the Tasks view or the API


def scheduler_of(runtime: Runtime) -> Scheduler:
    """The server's scheduler (every server has one, over its journal)."""
    return runtime.chats.scheduler


def task_id_of(input: dict[str, Any]) -> str:
    """``task_id`` (or upstream's ``uuid``), required."""
    task_id = get_str(input, "task_id") or get_str(input, "uuid")
    if not task_id.strip():
        raise bad_request("'task_id' is required", field="task_id")
    if len(task_id) > 200:
        raise bad_request("'task_id' is too long", field="task_id")
    return task_id


def revision_of(input: dict[str, Any], *, required: bool) -> int | None:
    """``expected_revision`` (or ``revision``): the task's revision the edit was made on."""
    key = "expected_revision" if input.get("expected_revision") not in (None, "") else "revision"
    if input.get(key) in (None, ""):
        if required:
            raise bad_request(
                "'expected_revision' is required: the task's revision when you read it",
                field="expected_revision",
            )
        return None
    return get_int(input, key, minimum=1)


def task_fields(input: dict[str, Any]) -> dict[str, Any]:
    """The task's own fields of a request (everything but the request's plumbing)."""
    if isinstance(input.get("task"), dict):  # {"task": {...}} is accepted as well
        return dict(input["task"])
    plumbing = {"api_key", "expected_revision", "revision", "task_id", "uuid", "key"}
    return {k: v for k, v in input.items() if k not in plumbing}
