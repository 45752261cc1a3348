"""The decisions and retry_grants tables."""

from __future__ import annotations

from durability.records import Decision, RetryGrant
from durability.store._shapes import Shape
from durability.store._sql import Table

DECISIONS = Shape(Decision)
GRANTS = Shape(RetryGrant)


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
