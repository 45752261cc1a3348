"""SQLite's hot path for calls: an intent, a result, one statement each besides the bump."""

from __future__ import annotations

from typing import Any

from durability.records import Call
from durability.store._rows import CALLS, call_record, call_values, result_is_large
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
    def insert_call_if_free(self, call: Call, args_json: str | None = None) -> bool:
        # attempt 1 is free exactly when the position has no call (attempts count up from 1)
        if call.attempt != 1 or call.result_digest is not None:
            return super().insert_call_if_free(call, args_json)
        values = CALLS.ordered(call_values(call, args_json, None, None))
        cur = self.conn.execute(_INSERT_IF_FREE, (*values, call.run_id))
        if cur.rowcount != 1:
            return False
        self.conn.execute(
            "UPDATE runs SET version = version + 1, updated_at = ? WHERE id = ?",
            (call.created_at, call.run_id),
        )
        return True

    def close_open_call(
        self,
        call_id: str,
        state: str,
        result: Any,
        result_json: str,
        result_digest: str,
        now: float,
    ) -> tuple[Call, str] | None:
        if result_is_large(result_json):
            return super().close_open_call(call_id, state, result, result_json, result_digest, now)
        values = (state, result_json, result_digest, now, call_id)
        fetched = self.conn.execute(_CLOSE_OPEN, values).fetchall()
        if not fetched:
            return None
        row = CALLS.named(fetched[0])
        context_id = self.bump_active_run(row["run_id"], now)
        return call_record(row, result), str(context_id)
