"""The runs table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durability.records import Run
from durability.store._postgres.base import PostgresBase
from durability.store._rows import RUNS, dump, run_record, run_values

_INSERT = (
    f"INSERT INTO runs ({RUNS.select}) VALUES ({', '.join(f'%({name})s' for name in RUNS.names)})"
)


class RunRows(PostgresBase):
    def insert_run(self, run: Run) -> None:
        self.conn.execute(_INSERT, run_values(run))

    def get_run(self, run_id: str) -> Run | None:
        row = self.one(RUNS, f"SELECT {RUNS.select} FROM runs WHERE id = %s{self.lock}", (run_id,))
        return run_record(row) if row else None

    def open_run_for_context(self, context_id: str) -> Run | None:
        row = self.one(
            RUNS,
            f"SELECT {RUNS.select} FROM runs WHERE context_id = %s"
            f" AND status IN ('active', 'needs_attention'){self.lock}",
            (context_id,),
        )
        return run_record(row) if row else None

    def update_run(self, run: Run) -> None:
        self.conn.execute(
            "UPDATE runs SET status = %(status)s, version = %(version)s, reason = %(reason)s,"
            " reason_detail = %(detail)s, recovery_attempts = %(attempts)s,"
            " updated_at = %(updated_at)s WHERE id = %(id)s",
            {
                "id": run.id,
                "status": run.status,
                "version": run.version,
                "reason": run.reason,
                "detail": None if run.reason_detail is None else dump(run.reason_detail),
                "attempts": run.recovery_attempts,
                "updated_at": run.updated_at,
            },
        )

    def bump_active_run(self, run_id: str, now: float) -> str | None:
        context_id = self.scalar(
            "UPDATE runs SET version = version + 1, updated_at = %s WHERE id = %s"
            " AND status = 'active' RETURNING context_id",
            (now, run_id),
        )
        return None if context_id is None else str(context_id)

    def list_runs(
        self, statuses: Sequence[str] | None, context_id: str | None, limit: int
    ) -> list[Run]:
        where: list[str] = []
        args: list[Any] = []
        if statuses is not None:
            where.append("status = ANY(%s)")
            args.append(list(statuses))
        if context_id is not None:
            where.append("context_id = %s")
            args.append(context_id)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self.all(
            RUNS,
            f"SELECT {RUNS.select} FROM runs {clause} ORDER BY created_at DESC, no DESC LIMIT %s",
            [*args, limit],
        )
        return [run_record(r) for r in rows]

    def delete_run(self, run_id: str) -> None:
        self.conn.execute("DELETE FROM runs WHERE id = %s", (run_id,))

    def contexts_with_runs(self, context_ids: Sequence[str]) -> set[str]:
        ids = list(dict.fromkeys(context_ids))
        if not ids:
            return set()
        rows = self.conn.execute(
            "SELECT DISTINCT context_id FROM runs WHERE context_id = ANY(%s)", (ids,)
        ).fetchall()
        return {str(r[0]) for r in rows}
