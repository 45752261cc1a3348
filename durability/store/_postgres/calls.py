"""PostgreSQL's hot path for calls: an intent, a result, one statement each (data-modifying
CTEs that check, write and bump the run together)."""

from __future__ import annotations

from durability.store._rows import CALLS, Columns, Named
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
    def _insert_first(self, values: Named) -> bool:
        return self.scalar(_INSERT_IF_FREE, values) is not None

    def _close_small(
        self, state: str, result_json: str, result_digest: str, now: float, call_id: str
    ) -> Named | None:
        values = {
            "state": state,
            "result": result_json,
            "result_digest": result_digest,
            "now": now,
            "id": call_id,
        }
        return self.one(_CLOSED, _CLOSE_OPEN, values)
