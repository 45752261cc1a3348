"""The scheduled_tasks table (durability/schedules.py), for both engines.

Every statement here is plain SQL that SQLite and PostgreSQL both take, written once with
``?`` markers (durability/store/_sql.py).
A write that must not lose a race is one conditional statement (``... WHERE revision =
<expected>``), so neither engine needs a row lock for it.
"""

from __future__ import annotations

from durability.store._rows import TASKS, task_row, task_values
from durability.store._sql import SqlTx
from durability.store.base import TaskRow

_INSERT = (
    f"INSERT INTO scheduled_tasks ({TASKS.select}) VALUES ({', '.join('?' * len(TASKS.names))})"
    " ON CONFLICT (id) DO NOTHING"
)
#: ``done_until`` only moves forward: the new value when it is later, else the stored one.
_FORWARD = "done_until = CASE WHEN done_until < ? THEN ? ELSE done_until END"


class TaskRows(SqlTx):
    def get_task(self, task_id: str) -> TaskRow | None:
        row = self.run(
            f"SELECT {TASKS.select} FROM scheduled_tasks WHERE id = ?", (task_id,)
        ).fetchone()
        return None if row is None else task_row(TASKS.named(row))

    def list_tasks(self) -> list[TaskRow]:
        rows = self.run(f"SELECT {TASKS.select} FROM scheduled_tasks ORDER BY created_at, id")
        return [task_row(TASKS.named(r)) for r in rows.fetchall()]

    def insert_task(self, row: TaskRow) -> bool:
        return bool(self.run(_INSERT, TASKS.ordered(task_values(row))).rowcount == 1)

    def replace_task_definition(
        self,
        task_id: str,
        expected_revision: int,
        body: str,
        digest: str,
        now: float,
        actor: str,
        done_until: float | None,
    ) -> bool:
        floor = -1.0 if done_until is None else done_until
        cursor = self.run(
            "UPDATE scheduled_tasks SET revision = revision + 1, body = ?, digest = ?,"
            f" updated_at = ?, updated_by = ?, {_FORWARD} WHERE id = ? AND revision = ?",
            (body, digest, now, actor, floor, floor, task_id, expected_revision),
        )
        return bool(cursor.rowcount == 1)

    def delete_task(self, task_id: str, expected_revision: int | None) -> bool:
        if expected_revision is None:
            cursor = self.run("DELETE FROM scheduled_tasks WHERE id = ?", (task_id,))
        else:
            cursor = self.run(
                "DELETE FROM scheduled_tasks WHERE id = ? AND revision = ?",
                (task_id, expected_revision),
            )
        return bool(cursor.rowcount == 1)

    def record_task_firing(
        self, task_id: str, slot: float | None, input_id: str, run_id: str | None, now: float
    ) -> bool:
        if slot is None:
            cursor = self.run(
                "UPDATE scheduled_tasks SET last_input_id = ?, last_run_id = ?,"
                " last_fired_at = ? WHERE id = ?",
                (input_id, run_id, now, task_id),
            )
        else:
            cursor = self.run(
                "UPDATE scheduled_tasks SET last_input_id = ?, last_run_id = ?,"
                f" last_fired_at = ?, last_slot = ?, {_FORWARD} WHERE id = ?",
                (input_id, run_id, now, slot, slot, slot, task_id),
            )
        return bool(cursor.rowcount == 1)

    def record_task_skip(self, task_id: str, slot: float, skip_json: str) -> bool:
        cursor = self.run(
            f"UPDATE scheduled_tasks SET last_skip = ?, {_FORWARD} WHERE id = ?",
            (skip_json, slot, slot, task_id),
        )
        return bool(cursor.rowcount == 1)
