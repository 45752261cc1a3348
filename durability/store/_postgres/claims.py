"""The runs' fencing columns and the claims table (shared workers: durability/cluster.py)."""

from __future__ import annotations

from typing import Any

from durability.store._sql import SqlTx


class ClaimRows(SqlTx):
    def lock_fence(
        self, run_id: str | None = None, call_id: str | None = None
    ) -> tuple[str, int | None] | None:
        if run_id is not None:
            row = self.conn.execute(
                "SELECT id, fence FROM runs WHERE id = %s FOR NO KEY UPDATE", (run_id,)
            ).fetchone()
        else:
            row = self.conn.execute(
                "SELECT r.id, r.fence FROM runs r JOIN calls c ON c.run_id = r.id"
                " WHERE c.id = %s FOR NO KEY UPDATE OF r",
                (call_id,),
            ).fetchone()
        return (str(row[0]), row[1]) if row else None

    def insert_claim(self, run_id: str, worker_id: str, lease_seconds: float) -> Any:
        from durability.store._postgres_claims import claim_new_run

        context_id = self.scalar("SELECT context_id FROM runs WHERE id = %s", (run_id,))
        return claim_new_run(self.conn, run_id, str(context_id), worker_id, lease_seconds)
