"""The SQL of scheduled tasks (durability/schedules.py), for both engines.

Kept apart from the engines' row modules: every statement here is plain SQL that SQLite and
PostgreSQL both take; only the parameter marker differs (``?`` or ``%s``), chosen from the
transaction's connection. A write that must not lose a race is one conditional statement
(``... WHERE revision = <expected>``), so neither engine needs a row lock for it.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from dataclasses import dataclass
from typing import Any

from durability.store.base import StoreTx

COLUMNS = (
    "id, revision, body, digest, created_at, created_by, updated_at, updated_by, done_until,"
    " last_slot, last_input_id, last_run_id, last_fired_at, last_skip"
)


@dataclass(frozen=True)
class TaskRow:
    id: str
    revision: int
    body: str
    digest: str
    created_at: float
    created_by: str
    updated_at: float
    updated_by: str
    done_until: float
    last_slot: float | None = None
    last_input_id: str | None = None
    last_run_id: str | None = None
    last_fired_at: float | None = None
    last_skip: str | None = None


class ScheduleRows:
    """The statements of one transaction (``tx``: any engine's StoreTx with a ``conn``)."""

    def __init__(self, tx: StoreTx) -> None:
        conn: Any = getattr(tx, "conn")  # noqa: B009 - every engine's StoreTx has one
        self.conn = conn
        self.mark = "?" if isinstance(conn, sqlite3.Connection) else "%s"

    def _sql(self, text: str) -> str:
        return text.replace("?", self.mark)

    @staticmethod
    def _row(row: Any) -> TaskRow:
        return TaskRow(
            str(row[0]),
            int(row[1]),
            str(row[2]),
            str(row[3]),
            float(row[4]),
            str(row[5]),
            float(row[6]),
            str(row[7]),
            float(row[8]),
            None if row[9] is None else float(row[9]),
            row[10],
            row[11],
            None if row[12] is None else float(row[12]),
            row[13],
        )

    def get(self, task_id: str) -> TaskRow | None:
        row = self.conn.execute(
            self._sql(f"SELECT {COLUMNS} FROM scheduled_tasks WHERE id = ?"), (task_id,)
        ).fetchone()
        return None if row is None else self._row(row)

    def list(self) -> list[TaskRow]:
        rows = self.conn.execute(
            f"SELECT {COLUMNS} FROM scheduled_tasks ORDER BY created_at, id"
        ).fetchall()
        return [self._row(r) for r in rows]

    def insert(self, row: TaskRow) -> bool:
        """Insert a new task; False (nothing written) when the id is taken."""
        cursor = self.conn.execute(
            self._sql(
                f"INSERT INTO scheduled_tasks ({COLUMNS}) VALUES"
                " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
            ),
            dataclasses.astuple(row),  # the fields in COLUMNS order
        )
        return cursor.rowcount == 1

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
        """Store a new definition at revision + 1 when the task is at ``expected_revision``
        (optionally moving ``done_until`` forward); False (nothing written) otherwise."""
        floor = -1.0 if done_until is None else done_until
        cursor = self.conn.execute(
            self._sql(
                "UPDATE scheduled_tasks SET revision = revision + 1, body = ?, digest = ?,"
                " updated_at = ?, updated_by = ?,"
                " done_until = CASE WHEN done_until < ? THEN ? ELSE done_until END"
                " WHERE id = ? AND revision = ?"
            ),
            (body, digest, now, actor, floor, floor, task_id, expected_revision),
        )
        return cursor.rowcount == 1

    def delete(self, task_id: str, expected_revision: int | None) -> bool:
        if expected_revision is None:
            cursor = self.conn.execute(
                self._sql("DELETE FROM scheduled_tasks WHERE id = ?"), (task_id,)
            )
        else:
            cursor = self.conn.execute(
                self._sql("DELETE FROM scheduled_tasks WHERE id = ? AND revision = ?"),
                (task_id, expected_revision),
            )
        return cursor.rowcount == 1

    def record_firing(
        self, task_id: str, slot: float | None, input_id: str, run_id: str | None, now: float
    ) -> bool:
        """The latest firing; a slot also moves ``done_until`` forward (never back)."""
        if slot is None:
            cursor = self.conn.execute(
                self._sql(
                    "UPDATE scheduled_tasks SET last_input_id = ?, last_run_id = ?,"
                    " last_fired_at = ? WHERE id = ?"
                ),
                (input_id, run_id, now, task_id),
            )
            return cursor.rowcount == 1
        cursor = self.conn.execute(
            self._sql(
                "UPDATE scheduled_tasks SET last_input_id = ?, last_run_id = ?, last_fired_at = ?,"
                " last_slot = ?, done_until = CASE WHEN done_until < ? THEN ? ELSE done_until END"
                " WHERE id = ?"
            ),
            (input_id, run_id, now, slot, slot, slot, task_id),
        )
        return cursor.rowcount == 1

    def record_skip(self, task_id: str, slot: float, skip_json: str) -> bool:
        """A slot handled without a firing: ``done_until`` moves past it, the reason stays."""
        cursor = self.conn.execute(
            self._sql(
                "UPDATE scheduled_tasks SET last_skip = ?,"
                " done_until = CASE WHEN done_until < ? THEN ? ELSE done_until END"
                " WHERE id = ?"
            ),
            (skip_json, slot, slot, task_id),
        )
        return cursor.rowcount == 1
