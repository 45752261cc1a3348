"""Scheduled tasks in the journal: definitions with revisions, and the firing bookkeeping.

The journal stores a task's definition as opaque JSON (what a task *means* - cron fields,
timezones, planned times - is python/helpers/scheduler_tasks.py's business): masked,
canonical, with its SHA-256, at most ``MAX_DEFINITION_BYTES``. Rules:

- **Revisions.** ``create_task`` stores revision 1. ``update_task`` and ``delete_task``
  name the revision they were made on; a stale one raises ``TaskConflict`` and writes
  nothing, so an edit in the Tasks view and an agent's edit never overwrite each other.
  The same definition again is a no-op (a retry whose answer was lost). Creating an id
  that exists returns the task when the definition is the same, else ``TaskExists``.
- **Firing bookkeeping** (``record_firing``, ``record_skip``) never changes the revision:
  ``done_until`` (every slot at or before it is handled) only moves forward, so two
  schedulers, or a restart that handles the same slot again, cannot move it back.
- **Damage.** A body that no longer matches its digest, or cannot be decoded, is reported
  on the record (``damage``) and never raises from a listing: one damaged task cannot
  break the list, the Tasks view or the scheduler (which never fires a damaged task). It
  can be deleted, or replaced whole on its revision.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from durability import integrity
from durability.canonical import canonical_json, digest
from durability.errors import InvalidArgument, TaskConflict, TaskExists, TaskNotFound
from durability.store.base import StoreTx
from durability.store.rows import TaskFields, TaskRow

MAX_DEFINITION_BYTES = 64 * 1024
MAX_SKIP_REASON = 64


@dataclass(frozen=True, kw_only=True)
class ScheduledTask(TaskFields):
    """A task as stored. ``definition`` is masked; ``damage`` is None for a sound record."""

    definition: Any
    last_skip: dict[str, Any] | None
    damage: str | None = None  # digest_mismatch | undecodable | not_an_object

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _task(row: TaskRow) -> ScheduledTask:
    value, damage = integrity.task_definition(row.body, row.digest)
    skip = integrity.load_json(row.last_skip)
    shared = {f.name: getattr(row, f.name) for f in dataclasses.fields(TaskFields)}
    last_skip = skip if isinstance(skip, dict) else None
    return ScheduledTask(**shared, definition=value, last_skip=last_skip, damage=damage)


def prepare_definition(definition: Any, masked: Any) -> tuple[str, str]:
    """(canonical body, digest) of an already masked definition, within the size limit."""
    if not isinstance(definition, dict):
        raise InvalidArgument("a task definition is an object", field="definition")
    body = canonical_json(masked)
    if len(body.encode("utf-8")) > MAX_DEFINITION_BYTES:
        raise InvalidArgument(
            f"a task definition holds at most {MAX_DEFINITION_BYTES} bytes of JSON",
            field="definition",
        )
    return body, digest(masked)


def _conflict(task_id: str, expected_revision: int, current_revision: int) -> TaskConflict:
    return TaskConflict(
        "the task changed since it was read",
        task_id=task_id,
        expected_revision=expected_revision,
        current_revision=current_revision,
    )


def get_task(tx: StoreTx, task_id: str) -> ScheduledTask:
    row = tx.tasks.get(task_id)
    if row is None:
        raise TaskNotFound("no such scheduled task", task_id=task_id)
    return _task(row)


def list_tasks(tx: StoreTx) -> list[ScheduledTask]:
    return [_task(row) for row in tx.tasks.list()]


def create_task(
    tx: StoreTx,
    task_id: str,
    body: str,
    body_digest: str,
    actor: str,
    now: float,
    done_until: float,
) -> ScheduledTask:
    fresh = TaskRow(
        id=task_id,
        revision=1,
        body=body,
        digest=body_digest,
        created_at=now,
        created_by=actor,
        updated_at=now,
        updated_by=actor,
        done_until=done_until,
    )
    if tx.tasks.insert(fresh):
        return _task(fresh)
    existing = get_task(tx, task_id)
    if existing.damage is None and existing.digest == body_digest:
        return existing  # the same task again (a retry, or a tool call run again)
    raise TaskExists("a task with this id exists with another definition", task_id=task_id)


def update_task(
    tx: StoreTx,
    task_id: str,
    body: str,
    body_digest: str,
    expected_revision: int,
    actor: str,
    now: float,
    done_until: float | None,
) -> ScheduledTask:
    current = get_task(tx, task_id)
    if current.damage is None and current.digest == body_digest and done_until is None:
        return current  # the same definition again: nothing to do
    if current.revision != expected_revision:
        raise _conflict(task_id, expected_revision, current.revision)
    if not tx.tasks.replace_definition(
        task_id, expected_revision, body, body_digest, now, actor, done_until
    ):
        latest = get_task(tx, task_id)  # changed between the read and the write
        raise _conflict(task_id, expected_revision, latest.revision)
    return get_task(tx, task_id)


def delete_task(tx: StoreTx, task_id: str, expected_revision: int | None) -> None:
    current = get_task(tx, task_id)
    if expected_revision is not None and current.revision != expected_revision:
        raise _conflict(task_id, expected_revision, current.revision)
    if not tx.tasks.delete(task_id, expected_revision):
        raise TaskConflict("the task changed since it was read", task_id=task_id)


def record_firing(
    tx: StoreTx, task_id: str, slot: float | None, input_id: str, run_id: str | None, now: float
) -> ScheduledTask:
    if not tx.tasks.record_firing(task_id, slot, input_id, run_id, now):
        raise TaskNotFound("no such scheduled task", task_id=task_id)
    return get_task(tx, task_id)


def record_skip(
    tx: StoreTx, task_id: str, slot: float, reason: str, detail: Any, now: float
) -> ScheduledTask:
    skip = {"slot": slot, "reason": reason, "at": now, "detail": detail}
    if not tx.tasks.record_skip(task_id, slot, canonical_json(skip)):
        raise TaskNotFound("no such scheduled task", task_id=task_id)
    return get_task(tx, task_id)
