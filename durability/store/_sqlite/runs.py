"""The runs table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durability.records import Run
from durability.store._rows import RUNS, dump, run_record, run_values
from durability.store._sqlite.base import SqliteBase, placeholders

_INSERT = f"INSERT INTO runs ({RUNS.select}) VALUES ({', '.join(':' + n for n in RUNS.names)})"


class RunRows(SqliteBase):
    def insert_run(self, run: Run) -> None:
        self.conn.execute(_INSERT, run_values(run))

    def get_run(self, run_id: str) -> Run | None:
        row = self.one(RUNS, f"SELECT {RUNS.select} FROM runs WHERE id = ?", (run_id,))
        return run_record(row) if row else None

    def open_run_for_context(self, context_id: str) -> Run | None:
        row = self.one(
            RUNS,
            f"SELECT {RUNS.select} FROM runs WHERE context_id = ?"
            " AND status IN ('active', 'needs_attention')",
            (context_id,),
        )
        return run_record(row) if row else None

    def update_run(self, run: Run) -> None:
        values = {
            "id": run.id,
            "status": run.status,
            "version": run.version,
            "reason": run.reason,
            "detail": None if run.reason_detail is None else dump(run.reason_detail),
            "attempts": run.recovery_attempts,
            "updated_at": run.updated_at,
        }
        # The common change is a version bump alone (every intent, result, checkpoint):
        # set only version and updated_at, which no index covers, so one page is written.
        cur = self.conn.execute(
            "UPDATE runs SET version = :version, updated_at = :updated_at WHERE id = :id"
            " AND status = :status AND reason IS :reason AND reason_detail IS :detail"
            " AND recovery_attempts = :attempts",
            values,
        )
        if cur.rowcount:
            return
        self.conn.execute(
            "UPDATE runs SET status = :status, version = :version, reason = :reason,"
            " reason_detail = :detail, recovery_attempts = :attempts, updated_at = :updated_at"
            " WHERE id = :id",
            values,
        )

    def bump_active_run(self, run_id: str, now: float) -> str | None:
        rows = self.conn.execute(
            "UPDATE runs SET version = version + 1, updated_at = ? WHERE id = ?"
            " AND status = 'active' RETURNING context_id",
            (now, run_id),
        ).fetchall()
        return str(rows[0][0]) if rows else None

    def list_runs(
        self, statuses: Sequence[str] | None, context_id: str | None, limit: int
    ) -> list[Run]:
        where: list[str] = []
        args: list[Any] = []
        if statuses is not None:
            where.append(f"status IN ({placeholders(len(statuses))})")
            args.extend(statuses)
        if context_id is not None:
            where.append("context_id = ?")
            args.append(context_id)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self.all(
            RUNS,
            f"SELECT {RUNS.select} FROM runs {clause} ORDER BY created_at DESC, rowid DESC LIMIT ?",
            [*args, limit],
        )
        return [run_record(r) for r in rows]

    def delete_run(self, run_id: str) -> None:
        self.conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    def contexts_with_runs(self, context_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        ids = list(dict.fromkeys(context_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            found.update(
                str(c)
                for c in self.scalars(
                    "SELECT DISTINCT context_id FROM runs"
                    f" WHERE context_id IN ({placeholders(len(chunk))})",
                    chunk,
                )
            )
        return found
