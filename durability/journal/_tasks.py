"""Scheduled tasks: definitions with revisions, and the firing bookkeeping (the rules are
durability/schedules.py's; the scheduler itself is python/helpers/scheduler.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durability import schedules
from durability.journal._plan import Plan, read, write
from durability.journal._validation import (
    mask_storable,
    require_instant,
    require_int,
    require_text,
)

if TYPE_CHECKING:  # pragma: no cover
    from durability.journal._core import Journal


def create_task(
    journal: Journal, task_id: str, definition: Any, actor: str, done_until: float
) -> Plan[schedules.ScheduledTask]:
    require_text("task_id", task_id)
    require_text("actor", actor)
    until = require_instant("done_until", done_until)
    masked = mask_storable(journal.masker, definition)
    body, body_digest = schedules.prepare_definition(definition, masked)
    now = journal.clock()
    return write(
        lambda tx: schedules.create_task(tx, task_id, body, body_digest, actor, now, until)
    )


def get_task(task_id: str) -> Plan[schedules.ScheduledTask]:
    require_text("task_id", task_id)
    return read(lambda tx: schedules.get_task(tx, task_id))


def list_tasks() -> Plan[list[schedules.ScheduledTask]]:
    return read(schedules.list_tasks)


def update_task(
    journal: Journal,
    task_id: str,
    definition: Any,
    expected_revision: int,
    actor: str,
    done_until: float | None,
) -> Plan[schedules.ScheduledTask]:
    require_text("task_id", task_id)
    require_int("expected_revision", expected_revision, minimum=1)
    require_text("actor", actor)
    until = None if done_until is None else require_instant("done_until", done_until)
    masked = mask_storable(journal.masker, definition)
    body, body_digest = schedules.prepare_definition(definition, masked)
    now = journal.clock()
    return write(
        lambda tx: schedules.update_task(
            tx, task_id, body, body_digest, expected_revision, actor, now, until
        )
    )


def delete_task(task_id: str, expected_revision: int | None) -> Plan[None]:
    require_text("task_id", task_id)
    if expected_revision is not None:
        require_int("expected_revision", expected_revision, minimum=1)
    return write(lambda tx: schedules.delete_task(tx, task_id, expected_revision))


def record_task_firing(
    journal: Journal, task_id: str, slot: float | None, input_id: str, run_id: str | None
) -> Plan[schedules.ScheduledTask]:
    require_text("task_id", task_id)
    require_text("input_id", input_id)
    at = None if slot is None else require_instant("slot", slot)
    now = journal.clock()
    return write(lambda tx: schedules.record_firing(tx, task_id, at, input_id, run_id, now))


def record_task_skip(
    journal: Journal, task_id: str, slot: float, reason: str, detail: Any
) -> Plan[schedules.ScheduledTask]:
    require_text("task_id", task_id)
    at = require_instant("slot", slot)
    require_text("reason", reason, max_length=schedules.MAX_SKIP_REASON)
    masked = mask_storable(journal.masker, detail)
    now = journal.clock()
    return write(lambda tx: schedules.record_skip(tx, task_id, at, reason, masked, now))
