"""The decisions, retry_grants, standing_grants and standing_grant_uses tables."""

from __future__ import annotations

import builtins
from typing import Any, ClassVar, Generic, TypeVar

from durability.records import Decision, RetryGrant, StandingGrant, StandingGrantUse
from durability.store._shapes import Shape
from durability.store._sql import Args, Table

DECISIONS = Shape(Decision)
GRANTS = Shape(RetryGrant)
STANDING = Shape(StandingGrant)
USES = Shape(StandingGrantUse)

R = TypeVar("R")


class _Numbered(Table, Generic[R]):
    """A table of one record type whose ``id`` the table assigns: its records added, and
    read back by a condition (``WHERE ...`` with ``?`` markers, its order, its limit)."""

    name: ClassVar[str]
    shape: ClassVar[Shape[Any]]

    def insert(self, record: R) -> int:
        columns = self.shape.names[1:]  # the id is the table's
        return self.sql.insert_id(
            f"INSERT INTO {self.name} ({', '.join(columns)})"
            f" VALUES ({', '.join('?' for _ in columns)})",
            [getattr(record, name) for name in columns],
        )

    def _first(self, condition: str, args: Args) -> R | None:
        found: R | None = self.sql.one(self.shape, f"{self._select} {condition}", args)
        return found

    def _rows(self, condition: str, args: Args) -> builtins.list[R]:
        return self.sql.all(self.shape, f"{self._select} {condition}", args)

    @property
    def _select(self) -> str:
        return f"SELECT {self.shape.select} FROM {self.name}"


class DecisionTable(_Numbered[Decision]):
    name, shape = "decisions", DECISIONS

    def on_version(self, run_id: str, version: int) -> Decision | None:
        """The decision made on ``version`` of the run, if any."""
        return self._first("WHERE run_id = ? AND version = ?", (run_id, version))

    def list(self, run_id: str) -> list[Decision]:
        return self._rows("WHERE run_id = ? ORDER BY id", (run_id,))

    def decided_runs(self, limit: int) -> builtins.list[str]:
        """The runs with a decision, the most recently decided first."""
        rows = self.sql.scalars(
            "SELECT run_id FROM decisions GROUP BY run_id ORDER BY MAX(id) DESC LIMIT ?",
            (limit,),
        )
        return [str(r) for r in rows]


class GrantTable(Table):
    def insert(self, run_id: str, attempts: int, actor: str, now: float) -> int:
        return self.sql.insert_id(
            "INSERT INTO retry_grants (run_id, attempts, remaining, actor, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (run_id, attempts, attempts, actor, now),
        )

    def consume(self, run_id: str) -> bool:
        """Use one retry of the run's oldest grant with any left; False when none is."""
        consumed = self.sql.scalar(
            "UPDATE retry_grants SET remaining = remaining - 1 WHERE id = (SELECT id FROM"
            " retry_grants WHERE run_id = ? AND remaining > 0 ORDER BY id LIMIT 1) RETURNING id",
            (run_id,),
        )
        return consumed is not None

    def list(self, run_id: str) -> list[RetryGrant]:
        return self.sql.all(
            GRANTS,
            f"SELECT {GRANTS.select} FROM retry_grants WHERE run_id = ? ORDER BY id",
            (run_id,),
        )


class StandingGrantTable(_Numbered[StandingGrant]):
    name, shape = "standing_grants", STANDING

    def get(self, grant_id: int) -> StandingGrant | None:
        return self._first("WHERE id = ?", (grant_id,))

    def in_force(self, scope: str, target: str) -> StandingGrant | None:
        """The newest grant of a scope and target (attempts 0: withdrawn)."""
        return self._first(
            "WHERE scope = ? AND target = ? ORDER BY id DESC LIMIT 1", (scope, target)
        )

    def list(self, limit: int) -> list[StandingGrant]:
        return self._rows("ORDER BY id DESC LIMIT ?", (limit,))

    def use(self, grant_id: int, run_id: str, call_id: str, now: float) -> int:
        return self.sql.insert_id(
            "INSERT INTO standing_grant_uses (grant_id, run_id, call_id, created_at)"
            " VALUES (?, ?, ?, ?)",
            (grant_id, run_id, call_id, now),
        )

    def uses(self, run_id: str) -> builtins.list[StandingGrantUse]:
        return self.sql.all(
            USES,
            f"SELECT {USES.select} FROM standing_grant_uses WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
