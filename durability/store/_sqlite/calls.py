"""SQLite's hot path for calls: an intent, a result, one statement each besides the bump."""

from __future__ import annotations

from durability.store._rows import CALLS, Named
from durability.store._sqlite.base import placeholders
from durability.store._tables.calls import CallRows

# attempt 1 of a position, when the run is active and the position is free: one statement
# (bound by position, in CALLS' order, then the run's id)
_INSERT_IF_FREE = (
    f"INSERT OR IGNORE INTO calls ({CALLS.select}) SELECT {placeholders(len(CALLS.names))}"
    " WHERE EXISTS (SELECT 1 FROM runs WHERE id = ? AND status = 'active')"
)
_CLOSE_OPEN = (
    "UPDATE calls SET state = ?, result = ?, result_blob = NULL, result_digest = ?,"
    " closed_at = ? WHERE id = ? AND state = 'open' AND EXISTS"
    " (SELECT 1 FROM runs WHERE runs.id = calls.run_id AND runs.status = 'active')"
    f" RETURNING {CALLS.select}"
)


class SqliteCallRows(CallRows):
    def _insert_first(self, values: Named) -> bool:
        cur = self.conn.execute(_INSERT_IF_FREE, (*CALLS.ordered(values), values["run_id"]))
        if cur.rowcount != 1:
            return False
        self.conn.execute(
            "UPDATE runs SET version = version + 1, updated_at = ? WHERE id = ?",
            (values["created_at"], values["run_id"]),
        )
        return True

    def _close_small(
        self, state: str, result_json: str, result_digest: str, now: float, call_id: str
    ) -> Named | None:
        values = (state, result_json, result_digest, now, call_id)
        fetched = self.conn.execute(_CLOSE_OPEN, values).fetchall()
        if not fetched:
            return None
        row = CALLS.named(fetched[0])
        row["context_id"] = self.bump_active_run(row["run_id"], now)
        return row
