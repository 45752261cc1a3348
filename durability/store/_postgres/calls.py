"""PostgreSQL's hot path for calls: an intent, a result, one statement each (data-modifying
CTEs that check, write and bump the run together)."""

from __future__ import annotations

from typing import Any

from durability.records import Call
from durability.store._rows import CALLS, Columns, call_record, call_values, result_is_large
from durability.store._tables.calls import CallRows

_TYPES = {
    "agent_no": "bigint",
    "seq": "bigint",
    "attempt": "bigint",
    "created_at": "double precision",
    "closed_at": "double precision",
}
_VALUES = ", ".join(f"%({name})s" for name in CALLS.names)
#: ``%(name)s::type`` for each column: a SELECT list (unlike VALUES) has no target types.
_TYPED_VALUES = ", ".join(f"%({name})s::{_TYPES.get(name, 'text')}" for name in CALLS.names)
# attempt 1 of a position, when the run is active and the position is free: one statement
_INSERT_IF_FREE = (
    "WITH bumped AS (UPDATE runs SET version = version + 1, updated_at = %(created_at)s"
    " WHERE id = %(run_id)s AND status = 'active' AND NOT EXISTS (SELECT 1 FROM calls"
    " WHERE run_id = %(run_id)s AND agent_no = %(agent_no)s AND seq = %(seq)s) RETURNING id)"
    f" INSERT INTO calls ({CALLS.select}) SELECT {_TYPED_VALUES} FROM bumped RETURNING id"
)
_CLOSED = Columns(*CALLS.names, "context_id")
_CLOSE_OPEN = (
    "WITH closed AS (UPDATE calls SET state = %(state)s, result = %(result)s,"
    " result_blob = NULL, result_digest = %(result_digest)s, closed_at = %(now)s"
    " WHERE id = %(id)s AND state = 'open' AND EXISTS (SELECT 1 FROM runs"
    " WHERE runs.id = calls.run_id AND runs.status = 'active')"
    f" RETURNING {CALLS.select}), bumped AS (UPDATE runs SET version = version + 1,"
    " updated_at = %(now)s FROM closed WHERE runs.id = closed.run_id RETURNING"
    f" runs.context_id) SELECT {CALLS.qualified('closed')}, bumped.context_id"
    " FROM closed, bumped"
)


class PostgresCallRows(CallRows):
    def insert_call_if_free(self, call: Call, args_json: str | None = None) -> bool:
        if call.attempt != 1 or call.result_digest is not None:
            return super().insert_call_if_free(call, args_json)
        values = call_values(call, args_json, None, None)
        return self.scalar(_INSERT_IF_FREE, values) is not None

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
        values = {
            "state": state,
            "result": result_json,
            "result_digest": result_digest,
            "now": now,
            "id": call_id,
        }
        row = self.one(_CLOSED, _CLOSE_OPEN, values)
        if row is None:
            return None
        return call_record(row, result), str(row["context_id"])
