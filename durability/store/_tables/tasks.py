"""The scheduled_tasks table (durability/schedules.py), for both engines.

A write that must not lose a race is one conditional statement (``... WHERE revision =
<expected>``), so it returns False (nothing written) instead of raising, and neither
engine needs a row lock for it.
"""

from __future__ import annotations

from durability.store._shapes import Shape, nullable
from durability.store._sql import Table
from durability.store.rows import TaskRow

_SECONDS = ("created_at", "updated_at", "done_until")
TASKS = Shape(
    TaskRow,
    convert={
        "id": str,
        "revision": int,
        "body": str,
        "digest": str,
        "created_by": str,
        "updated_by": str,
        **{name: float for name in _SECONDS},
        "last_slot": nullable(float),
        "last_fired_at": nullable(float),
    },
)
_INSERT = (
    f"INSERT INTO scheduled_tasks ({TASKS.select}) VALUES ({TASKS.placeholders()})"
    " ON CONFLICT (id) DO NOTHING"
)
#: ``done_until`` only moves forward: the new value when it is later, else the stored one.
_FORWARD = "done_until = CASE WHEN done_until < ? THEN ? ELSE done_until END"


class TaskTable(Table):
    def get(self, task_id: str) -> TaskRow | None:
        return self.sql.one(
            TASKS, f"SELECT {TASKS.select} FROM scheduled_tasks WHERE id = ?", (task_id,)
        )

    def list(self) -> list[TaskRow]:
        """Every task, oldest first."""
        return self.sql.all(
            TASKS, f"SELECT {TASKS.select} FROM scheduled_tasks ORDER BY created_at, id"
        )

    def insert(self, row: TaskRow) -> bool:
        """Insert a new task; False when the id is taken."""
        return bool(self.sql.run(_INSERT, TASKS.values(row)).rowcount == 1)

    def replace_definition(
        self,
        task_id: str,
        expected_revision: int,
        body: str,
        digest: str,
        now: float,
        actor: str,
        done_until: float | None,
    ) -> bool:
        """A new definition at revision + 1 when the task is at ``expected_revision``
        (``done_until``, when given, only moves forward)."""
        floor = -1.0 if done_until is None else done_until
        cursor = self.sql.run(
            "UPDATE scheduled_tasks SET revision = revision + 1, body = ?, digest = ?,"
            f" updated_at = ?, updated_by = ?, {_FORWARD} WHERE id = ? AND revision = ?",
            (body, digest, now, actor, floor, floor, task_id, expected_revision),
        )
        return bool(cursor.rowcount == 1)

    def delete(self, task_id: str, expected_revision: int | None) -> bool:
        if expected_revision is None:
            cursor = self.sql.run("DELETE FROM scheduled_tasks WHERE id = ?", (task_id,))
        else:
            cursor = self.sql.run(
                "DELETE FROM scheduled_tasks WHERE id = ? AND revision = ?",
                (task_id, expected_revision),
            )
        return bool(cursor.rowcount == 1)

    def record_firing(
        self, task_id: str, slot: float | None, input_id: str, run_id: str | None, now: float
    ) -> bool:
        """The latest firing; a slot also moves ``done_until`` forward (never back)."""
        if slot is None:
            cursor = self.sql.run(
                "UPDATE scheduled_tasks SET last_input_id = ?, last_run_id = ?,"
                " last_fired_at = ? WHERE id = ?",
                (input_id, run_id, now, task_id),
            )
        else:
            cursor = self.sql.run(
                "UPDATE scheduled_tasks SET last_input_id = ?, last_run_id = ?,"
                f" last_fired_at = ?, last_slot = ?, {_FORWARD} WHERE id = ?",
                (input_id, run_id, now, slot, slot, slot, task_id),
            )
        return bool(cursor.rowcount == 1)

    def record_skip(self, task_id: str, slot: float, skip_json: str) -> bool:
        """A slot handled without a firing: ``done_until`` moves past it."""
        cursor = self.sql.run(
            f"UPDATE scheduled_tasks SET last_skip = ?, {_FORWARD} WHERE id = ?",
            (skip_json, slot, slot, task_id),
        )
        return bool(cursor.rowcount == 1)
