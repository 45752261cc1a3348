"""The calls table (a result larger than RESULT_SPILL_BYTES lives in a blob).

Writing an intent and storing a result are the hot path: each engine folds check and
write into its own statements (``_insert_first`` and ``_close_small`` in
durability/store/_sqlite/calls.py and durability/store/_postgres/calls.py); the general
paths (a later attempt, a large result) come from durability/store/base.py.
"""

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
from durability.store._sql import SqlTx

# The hot path binds by position (faster than by name): the values come from
# call_values() by name, in CALLS' order (CALLS.ordered).
_INSERT = f"INSERT INTO calls ({CALLS.select}) VALUES ({', '.join('?' * len(CALLS.names))})"


class CallRows(SqlTx):
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
        self.run(_INSERT, CALLS.ordered(call_values(call, None, result, result_blob)))

    def get_call(self, call_id: str) -> Call | None:
        row = self.one(
            CALLS, f"SELECT {CALLS.select} FROM calls WHERE id = ?{self.lock}", (call_id,)
        )
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
        self.run(
            "UPDATE calls SET state = ?, result = ?, result_blob = ?, result_digest = ?,"
            " closed_at = ? WHERE id = ?",
            (call.state, result, result_blob, call.result_digest, call.closed_at, call.id),
        )

    def insert_call_if_free(self, call: Call, args_json: str | None = None) -> bool:
        # attempt 1 is free exactly when the position has no call (attempts count up from 1)
        if call.attempt != 1 or call.result_digest is not None:
            return super().insert_call_if_free(call, args_json)
        return self._insert_first(call_values(call, args_json, None, None))

    def _insert_first(self, values: Named) -> bool:
        """Insert attempt 1 (``values``: call_values() of a call without a result) and bump
        its run, when the run is active and the position free; in one engine's statements."""
        raise NotImplementedError

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
        row = self._close_small(state, result_json, result_digest, now, call_id)
        return None if row is None else (call_record(row, result), str(row["context_id"]))

    def _close_small(
        self, state: str, result_json: str, result_digest: str, now: float, call_id: str
    ) -> Named | None:
        """Close an open call of an active run with a result that fits its column and bump
        the run; the call's row with its run's ``context_id``, or None (nothing written)."""
        raise NotImplementedError

    def list_calls(
        self,
        run_id: str,
        states: Sequence[str] | None = None,
        from_seq: Mapping[int, int] | None = None,
    ) -> list[Call]:
        sql = f"SELECT {CALLS.select} FROM calls WHERE run_id = ?"
        args: list[Any] = [run_id]
        if states is not None:
            where, more = self.among("state", list(states))
            sql += f" AND {where}"
            args.extend(more)
        if from_seq:
            where, more = seq_filter(from_seq, "?")
            sql += where
            args.extend(more)
        return [self._call(r) for r in self.all(CALLS, f"{sql} ORDER BY {self.order}", args)]
