"""The decisions, retry_grants, standing_grants and standing_grant_uses tables."""

from __future__ import annotations

import builtins

from durability.records import Decision, RetryGrant, StandingGrant, StandingGrantUse
from durability.store._shapes import Shape
from durability.store._sql import Table

DECISIONS = Shape(Decision)
GRANTS = Shape(RetryGrant)
STANDING = Shape(StandingGrant)
USES = Shape(StandingGrantUse)


class DecisionTable(Table):
    def insert(self, decision: Decision) -> int:
        columns = DECISIONS.names[1:]  # the id is the table's
        return self.sql.insert_id(
            f"INSERT INTO decisions ({', '.join(columns)})"
            f" VALUES ({', '.join('?' for _ in columns)})",
            [getattr(decision, name) for name in columns],
        )

    def on_version(self, run_id: str, version: int) -> Decision | None:
        """The decision made on ``version`` of the run, if any."""
        return self.sql.one(
            DECISIONS,
            f"SELECT {DECISIONS.select} FROM decisions WHERE run_id = ? AND version = ?",
            (run_id, version),
        )

    def list(self, run_id: str) -> list[Decision]:
        return self.sql.all(
            DECISIONS,
            f"SELECT {DECISIONS.select} FROM decisions WHERE run_id = ? ORDER BY id",
            (run_id,),
        )

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


class StandingGrantTable(Table):
    def insert(self, grant: StandingGrant) -> int:
        columns = STANDING.names[1:]  # the id is the table's
        return self.sql.insert_id(
            f"INSERT INTO standing_grants ({', '.join(columns)})"
            f" VALUES ({', '.join('?' for _ in columns)})",
            [getattr(grant, name) for name in columns],
        )

    def get(self, grant_id: int) -> StandingGrant | None:
        return self.sql.one(
            STANDING, f"SELECT {STANDING.select} FROM standing_grants WHERE id = ?", (grant_id,)
        )

    def in_force(self, scope: str, target: str) -> StandingGrant | None:
        """The newest grant of a scope and target (attempts 0: withdrawn)."""
        return self.sql.one(
            STANDING,
            f"SELECT {STANDING.select} FROM standing_grants WHERE scope = ? AND target = ?"
            " ORDER BY id DESC LIMIT 1",
            (scope, target),
        )

    def list(self, limit: int) -> list[StandingGrant]:
        return self.sql.all(
            STANDING,
            f"SELECT {STANDING.select} FROM standing_grants ORDER BY id DESC LIMIT ?",
            (limit,),
        )

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
