"""The decisions and retry_grants tables."""

from __future__ import annotations

from durability.records import Decision, RetryGrant
from durability.store._rows import DECISIONS, GRANTS, decision_record, grant_record
from durability.store._sql import SqlTx


class DecisionRows(SqlTx):
    def insert_decision(self, decision: Decision) -> int:
        return self.insert_id(
            "INSERT INTO decisions (run_id, call_id, decision, version, actor, note, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                decision.run_id,
                decision.call_id,
                decision.decision,
                decision.version,
                decision.actor,
                decision.note,
                decision.created_at,
            ),
        )

    def decision_on_version(self, run_id: str, version: int) -> Decision | None:
        row = self.one(
            DECISIONS,
            f"SELECT {DECISIONS.select} FROM decisions WHERE run_id = ? AND version = ?",
            (run_id, version),
        )
        return decision_record(row) if row else None

    def list_decisions(self, run_id: str) -> list[Decision]:
        rows = self.all(
            DECISIONS,
            f"SELECT {DECISIONS.select} FROM decisions WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [decision_record(r) for r in rows]

    def insert_grant(self, run_id: str, attempts: int, actor: str, now: float) -> int:
        return self.insert_id(
            "INSERT INTO retry_grants (run_id, attempts, remaining, actor, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (run_id, attempts, attempts, actor, now),
        )

    def consume_grant(self, run_id: str) -> bool:
        consumed = self.scalar(
            "UPDATE retry_grants SET remaining = remaining - 1 WHERE id = (SELECT id FROM"
            " retry_grants WHERE run_id = ? AND remaining > 0 ORDER BY id LIMIT 1) RETURNING id",
            (run_id,),
        )
        return consumed is not None

    def list_grants(self, run_id: str) -> list[RetryGrant]:
        rows = self.all(
            GRANTS,
            f"SELECT {GRANTS.select} FROM retry_grants WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [grant_record(r) for r in rows]
