"""The contexts (chats), inputs and runs tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durability.records import Run
from durability.store._shapes import Shape, dump
from durability.store._sql import ACTIVE_RUN, OPEN_RUNS, Table
from durability.store.rows import InputRow

RUNS = Shape(Run, json=("reason_detail",))
INPUTS = Shape(InputRow)
_INSERT = f"INSERT INTO runs ({RUNS.select}) VALUES ({RUNS.placeholders()})"


def run_change(run: Run) -> tuple[Any, ...]:
    """The columns ``RunTable.update`` sets, in the order of its statement: status,
    version, reason, reason_detail, recovery_attempts, updated_at, and the run's id last."""
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


class ContextTable(Table):
    def ensure(self, context_id: str, now: float) -> None:
        self.sql.run(
            "INSERT INTO contexts (id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (context_id, now),
        )


class InputTable(Table):
    """Input ids, each bound to the run it started or joined."""

    def get(self, input_id: str) -> InputRow | None:
        return self.sql.one(
            INPUTS, f"SELECT {INPUTS.select} FROM inputs WHERE input_id = ?", (input_id,)
        )

    def insert(self, row: InputRow) -> None:
        self.sql.run(
            f"INSERT INTO inputs ({INPUTS.select}) VALUES ({INPUTS.placeholders()})",
            INPUTS.values(row),
        )


class RunTable(Table):
    def chat_spans(self) -> dict[str, tuple[float, float]]:
        """When each chat's first and newest runs began, by chat."""
        rows = self.sql.run(
            "SELECT context_id, MIN(created_at), MAX(created_at) FROM runs GROUP BY context_id"
        ).fetchall()
        return {str(c): (float(first), float(newest)) for c, first, newest in rows}

    def insert(self, run: Run) -> None:
        detail = None if run.reason_detail is None else dump(run.reason_detail)
        self.sql.run(_INSERT, RUNS.values(run, reason_detail=detail))

    def get(self, run_id: str) -> Run | None:
        sql = self.sql
        return sql.one(RUNS, f"SELECT {RUNS.select} FROM runs WHERE id = ?{sql.lock}", (run_id,))

    def open_for_context(self, context_id: str) -> Run | None:
        """The chat's one open run (active or held), if any."""
        return self.sql.one(
            RUNS,
            f"SELECT {RUNS.select} FROM runs WHERE context_id = ?"
            f" AND status IN ({OPEN_RUNS}){self.sql.lock}",
            (context_id,),
        )

    def update(self, run: Run) -> None:
        self.sql.run(
            "UPDATE runs SET status = ?, version = ?, reason = ?, reason_detail = ?,"
            " recovery_attempts = ?, updated_at = ? WHERE id = ?",
            run_change(run),
        )

    def bump_active(self, run_id: str, now: float) -> str | None:
        """Version + 1 on an active run; its context id, or None (nothing written)."""
        context_id = self.sql.scalar(
            "UPDATE runs SET version = version + 1, updated_at = ? WHERE id = ?"
            f" AND status = {ACTIVE_RUN} RETURNING context_id",
            (now, run_id),
        )
        return None if context_id is None else str(context_id)

    def list(self, statuses: Sequence[str] | None, context_id: str | None, limit: int) -> list[Run]:
        sql = self.sql
        where: list[str] = []
        args: list[Any] = []
        if statuses is not None:
            clause, more = sql.among("status", list(statuses))
            where.append(clause)
            args.extend(more)
        if context_id is not None:
            where.append("context_id = ?")
            args.append(context_id)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        return sql.all(
            RUNS,
            f"SELECT {RUNS.select} FROM runs {clause}"
            f" ORDER BY created_at DESC, {sql.order} DESC LIMIT ?",
            [*args, limit],
        )

    def delete(self, run_id: str) -> None:
        """Delete a run (its inputs, calls, checkpoints, decisions, grants and events
        cascade)."""
        self.sql.run("DELETE FROM runs WHERE id = ?", (run_id,))

    def contexts_with_runs(self, context_ids: Sequence[str]) -> set[str]:
        """The given chats that still have at least one run."""
        sql = self.sql
        found: set[str] = set()
        for batch in sql.batches(context_ids):
            where, args = sql.among("context_id", batch)
            rows = sql.scalars(f"SELECT DISTINCT context_id FROM runs WHERE {where}", args)
            found.update(str(c) for c in rows)
        return found
