"""The decisions and retry_grants tables."""

from __future__ import annotations

from durability.records import Decision, RetryGrant
from durability.store._rows import DECISIONS, GRANTS, decision_record, grant_record
from durability.store._sqlite.base import SqliteBase


class DecisionRows(SqliteBase):
    def insert_decision(self, decision: Decision) -> int:
        cur = self.conn.execute(
            "INSERT INTO decisions (run_id, call_id, decision, version, actor, note, created_at)"
            " VALUES (:run_id, :call_id, :decision, :version, :actor, :note, :created_at)",
            {
                "run_id": decision.run_id,
                "call_id": decision.call_id,
                "decision": decision.decision,
                "version": decision.version,
                "actor": decision.actor,
                "note": decision.note,
                "created_at": decision.created_at,
            },
        )
        return int(cur.lastrowid or 0)

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
        cur = self.conn.execute(
            "INSERT INTO retry_grants (run_id, attempts, remaining, actor, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (run_id, attempts, attempts, actor, now),
        )
        return int(cur.lastrowid or 0)

    def consume_grant(self, run_id: str) -> bool:
        ids = self.scalars(
            "SELECT id FROM retry_grants WHERE run_id = ? AND remaining > 0 ORDER BY id LIMIT 1",
            (run_id,),
        )
        if not ids:
            return False
        self.conn.execute(
            "UPDATE retry_grants SET remaining = remaining - 1 WHERE id = ?", (ids[0],)
        )
        return True

    def list_grants(self, run_id: str) -> list[RetryGrant]:
        rows = self.all(
            GRANTS,
            f"SELECT {GRANTS.select} FROM retry_grants WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [grant_record(r) for r in rows]
