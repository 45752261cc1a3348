"""Scheduled tasks: definitions with revisions, and the firing bookkeeping (the rules are
durability/schedules.py's; the scheduler itself is python/helpers/scheduler.py)."""

from __future__ import annotations

from typing import Any

from durability import schedules
from durability.journal._operation import JournalBase, operation
from durability.journal._plan import Plan, read, write
from durability.journal._validation import (
    mask_storable,
    require_instant,
    require_int,
    require_text,
)
from durability.schedules import ScheduledTask


class TaskOps:
    """Scheduled tasks: definitions with revisions, and what each firing handled."""

    @operation(prepare="definition")
    def create_task(
        journal: JournalBase, task_id: str, definition: Any, *, actor: str, done_until: float
    ) -> Plan[ScheduledTask]:
        """Store a new task at revision 1 (the same id and definition again returns it;
        another definition raises TaskExists). Slots at or before ``done_until`` never fire."""
        require_text("task_id", task_id)
        require_text("actor", actor)
        until = require_instant("done_until", done_until)
        masked = mask_storable(journal.masker, definition)
        body, body_digest = schedules.prepare_definition(definition, masked)
        now = journal.clock()
        return write(
            lambda tx: schedules.create_task(tx, task_id, body, body_digest, actor, now, until)
        )

    @operation()
    def get_task(journal: JournalBase, task_id: str) -> Plan[ScheduledTask]:
        """One task (TaskNotFound when unknown); a damaged one comes back with ``damage``."""
        require_text("task_id", task_id)
        return read(lambda tx: schedules.get_task(tx, task_id))

    @operation()
    def list_tasks(journal: JournalBase) -> Plan[list[ScheduledTask]]:
        """Every task, oldest first; damaged ones are listed with ``damage`` set."""
        return read(schedules.list_tasks)

    @operation(prepare="definition")
    def update_task(
        journal: JournalBase,
        task_id: str,
        definition: Any,
        *,
        expected_revision: int,
        actor: str,
        done_until: float | None = None,
    ) -> Plan[ScheduledTask]:
        """Replace the definition on ``expected_revision`` (TaskConflict when stale; the
        same definition again is a no-op). ``done_until`` moves the handled-slots mark
        forward, e.g. to now when the schedule changed."""
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

    @operation()
    def delete_task(
        journal: JournalBase, task_id: str, *, expected_revision: int | None = None
    ) -> Plan[None]:
        """Remove a task (its chat and runs stay); with ``expected_revision``, only when
        the task is still at that revision (else TaskConflict)."""
        require_text("task_id", task_id)
        if expected_revision is not None:
            require_int("expected_revision", expected_revision, minimum=1)
        return write(lambda tx: schedules.delete_task(tx, task_id, expected_revision))

    @operation()
    def record_task_firing(
        journal: JournalBase,
        task_id: str,
        *,
        slot: float | None,
        input_id: str,
        run_id: str | None,
    ) -> Plan[ScheduledTask]:
        """The task fired ``input_id`` (run ``run_id``); a ``slot`` (None for a manual run)
        is handled from now on. The revision does not change."""
        require_text("task_id", task_id)
        require_text("input_id", input_id)
        at = None if slot is None else require_instant("slot", slot)
        now = journal.clock()
        return write(lambda tx: schedules.record_firing(tx, task_id, at, input_id, run_id, now))

    @operation(prepare="detail")
    def record_task_skip(
        journal: JournalBase, task_id: str, *, slot: float, reason: str, detail: Any = None
    ) -> Plan[ScheduledTask]:
        """The slot is handled without a firing, for ``reason`` (e.g. run_held)."""
        require_text("task_id", task_id)
        at = require_instant("slot", slot)
        require_text("reason", reason, max_length=schedules.MAX_SKIP_REASON)
        masked = mask_storable(journal.masker, detail)
        now = journal.clock()
        return write(lambda tx: schedules.record_skip(tx, task_id, at, reason, masked, now))
