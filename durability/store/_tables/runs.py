"""The runs table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durability.records import Run
from durability.store._rows import RUNS, dump, run_record, run_values
from durability.store._sql import SqlTx

_INSERT = f"INSERT INTO runs ({RUNS.select}) VALUES ({', '.join('?' * len(RUNS.names))})"


def run_change(run: Run) -> tuple[Any, ...]:
    """The columns ``update_run`` sets, in the order of its statement: status, version,
    reason, reason_detail, recovery_attempts, updated_at, and the run's id last."""
    detail = None if run.reason_detail is None else dump(run.reason_detail)
    return (
        run.status,
        run.version,
        run.reason,
        detail,
        run.recovery_attempts,
        run.updated_at,
        run.id,
    )


class RunRows(SqlTx):
    def insert_run(self, run: Run) -> None:
        self.run(_INSERT, RUNS.ordered(run_values(run)))

    def get_run(self, run_id: str) -> Run | None:
        row = self.one(RUNS, f"SELECT {RUNS.select} FROM runs WHERE id = ?{self.lock}", (run_id,))
        return run_record(row) if row else None

    def open_run_for_context(self, context_id: str) -> Run | None:
        row = self.one(
            RUNS,
            f"SELECT {RUNS.select} FROM runs WHERE context_id = ?"
            f" AND status IN ('active', 'needs_attention'){self.lock}",
            (context_id,),
        )
        return run_record(row) if row else None

    def update_run(self, run: Run) -> None:
        self.run(
            "UPDATE runs SET status = ?, version = ?, reason = ?, reason_detail = ?,"
            " recovery_attempts = ?, updated_at = ? WHERE id = ?",
            run_change(run),
        )

    def bump_active_run(self, run_id: str, now: float) -> str | None:
        context_id = self.scalar(
            "UPDATE runs SET version = version + 1, updated_at = ? WHERE id = ?"
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
            clause, more = self.among("status", list(statuses))
            where.append(clause)
            args.extend(more)
        if context_id is not None:
            where.append("context_id = ?")
            args.append(context_id)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self.all(
            RUNS,
            f"SELECT {RUNS.select} FROM runs {clause}"
            f" ORDER BY created_at DESC, {self.order} DESC LIMIT ?",
            [*args, limit],
        )
        return [run_record(r) for r in rows]

    def delete_run(self, run_id: str) -> None:
        self.run("DELETE FROM runs WHERE id = ?", (run_id,))

    def contexts_with_runs(self, context_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for batch in self.batches(context_ids):
            where, args = self.among("context_id", batch)
            found.update(
                str(c)
                for c in self.scalars(f"SELECT DISTINCT context_id FROM runs WHERE {where}", args)
            )
        return found
