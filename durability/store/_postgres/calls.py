"""The calls table (a result larger than RESULT_SPILL_BYTES lives in a blob)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from durability.canonical import digest_text
from durability.records import Call
from durability.store._postgres.base import PostgresBase
from durability.store._rows import (
    CALLS,
    Columns,
    Named,
    call_record,
    call_values,
    dump,
    load,
    result_is_large,
    seq_filter,
    spilled_result,
)

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
_INSERT = f"INSERT INTO calls ({CALLS.select}) VALUES ({_VALUES})"
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


class CallRows(PostgresBase):
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

    def _values(self, call: Call, args_json: str | None = None) -> Named:
        result, result_blob = self._result_columns(call)
        return call_values(call, args_json, result, result_blob)

    def insert_call(self, call: Call) -> None:
        self.conn.execute(_INSERT, self._values(call))

    def get_call(self, call_id: str) -> Call | None:
        row = self.one(
            CALLS, f"SELECT {CALLS.select} FROM calls WHERE id = %s{self.lock}", (call_id,)
        )
        return self._call(row) if row else None

    def latest_call_at(self, run_id: str, agent_no: int, seq: int) -> Call | None:
        row = self.one(
            CALLS,
            f"SELECT {CALLS.select} FROM calls WHERE run_id = %s AND agent_no = %s AND seq = %s"
            " ORDER BY attempt DESC LIMIT 1",
            (run_id, agent_no, seq),
        )
        return self._call(row) if row else None

    def update_call(self, call: Call) -> None:
        result, result_blob = self._result_columns(call)
        self.conn.execute(
            "UPDATE calls SET state = %s, result = %s, result_blob = %s, result_digest = %s,"
            " closed_at = %s WHERE id = %s",
            (call.state, result, result_blob, call.result_digest, call.closed_at, call.id),
        )

    def insert_call_if_free(self, call: Call, args_json: str | None = None) -> bool:
        if call.attempt != 1 or call.result_digest is not None:
            return super().insert_call_if_free(call, args_json)
        return self.scalar(_INSERT_IF_FREE, self._values(call, args_json)) is not None

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

    def list_calls(
        self,
        run_id: str,
        states: Sequence[str] | None = None,
        from_seq: Mapping[int, int] | None = None,
    ) -> list[Call]:
        sql = f"SELECT {CALLS.select} FROM calls WHERE run_id = %s"
        args: list[Any] = [run_id]
        if states is not None:
            sql += " AND state = ANY(%s)"
            args.append(list(states))
        if from_seq:
            where, more = seq_filter(from_seq, "%s")
            sql += where
            args.extend(more)
        return [self._call(r) for r in self.all(CALLS, sql + " ORDER BY no", args)]
