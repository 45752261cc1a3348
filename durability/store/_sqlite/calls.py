"""The calls table (a result larger than RESULT_SPILL_BYTES lives in a blob)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from durability.canonical import digest_text
from durability.records import Call
from durability.store._rows import (
    CALLS,
    Named,
    call_record,
    call_values,
    dump,
    load,
    result_is_large,
    seq_filter,
    spilled_result,
)
from durability.store._sqlite.base import SqliteBase, placeholders

# The hot path binds by position (faster than by name): the values come from
# call_values() by name, in CALLS' order (CALLS.ordered).
_VALUES = placeholders(len(CALLS.names))
_INSERT = f"INSERT INTO calls ({CALLS.select}) VALUES ({_VALUES})"
# attempt 1 of a position, when the run is active and the position is free: one statement
_INSERT_IF_FREE = (
    f"INSERT OR IGNORE INTO calls ({CALLS.select}) SELECT {_VALUES}"
    " WHERE EXISTS (SELECT 1 FROM runs WHERE id = ? AND status = 'active')"
)
_CLOSE_OPEN = (
    "UPDATE calls SET state = ?, result = ?, result_blob = NULL, result_digest = ?,"
    " closed_at = ? WHERE id = ? AND state = 'open' AND EXISTS"
    " (SELECT 1 FROM runs WHERE runs.id = calls.run_id AND runs.status = 'active')"
    f" RETURNING {CALLS.select}"
)


class CallRows(SqliteBase):
    def _call(self, row: Named) -> Call:
        blob = row["result_blob"]
        if blob is None:
            return call_record(row, load(row["result"]))
        return call_record(row, spilled_result(row, self.get_blobs([blob]).get(blob)))

    def _result_columns(self, call: Call) -> tuple[str | None, str | None]:
        """The result's text for its column, or (when large) the hash of its blob."""
        if call.result_digest is None:
            return None, None
        text = dump(call.result)
        if not result_is_large(text):
            return text, None
        blob_hash = digest_text(text)
        self.put_blob(blob_hash, text.encode("utf-8"), call.closed_at or call.created_at)
        return None, blob_hash

    def insert_call(self, call: Call) -> None:
        result, result_blob = self._result_columns(call)
        self.conn.execute(_INSERT, CALLS.ordered(call_values(call, None, result, result_blob)))

    def get_call(self, call_id: str) -> Call | None:
        row = self.one(CALLS, f"SELECT {CALLS.select} FROM calls WHERE id = ?", (call_id,))
        return self._call(row) if row else None

    def latest_call_at(self, run_id: str, agent_no: int, seq: int) -> Call | None:
        row = self.one(
            CALLS,
            f"SELECT {CALLS.select} FROM calls WHERE run_id = ? AND agent_no = ? AND seq = ?"
            " ORDER BY attempt DESC LIMIT 1",
            (run_id, agent_no, seq),
        )
        return self._call(row) if row else None

    def update_call(self, call: Call) -> None:
        result, result_blob = self._result_columns(call)
        self.conn.execute(
            "UPDATE calls SET state = ?, result = ?, result_blob = ?, result_digest = ?,"
            " closed_at = ? WHERE id = ?",
            (call.state, result, result_blob, call.result_digest, call.closed_at, call.id),
        )

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

    def list_calls(
        self,
        run_id: str,
        states: Sequence[str] | None = None,
        from_seq: Mapping[int, int] | None = None,
    ) -> list[Call]:
        sql = f"SELECT {CALLS.select} FROM calls WHERE run_id = ?"
        args: list[Any] = [run_id]
        if states is not None:
            sql += f" AND state IN ({placeholders(len(states))})"
            args.extend(states)
        if from_seq:
            where, more = seq_filter(from_seq, "?")
            sql += where
            args.extend(more)
        return [self._call(r) for r in self.all(CALLS, sql + " ORDER BY rowid", args)]
