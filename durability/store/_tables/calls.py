"""The calls table (a result larger than RESULT_SPILL_BYTES lives in a blob).

Writing an intent and storing a result are the hot path: each engine folds check and
write into its own statements (``_insert_first`` and ``_close_small``, in
durability/store/sqlite_tx.py and durability/store/postgres_tx.py); the general paths
here (a later attempt, a large result, an engine without its own) compose the table's
plain statements.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from durability.canonical import Undecodable, digest_text
from durability.records import Call
from durability.status import CallState, RunStatus
from durability.store._shapes import RESULT_SPILL_BYTES, Shape, dump, load
from durability.store._sql import Sql, Table
from durability.store._tables.blobs import BlobTable
from durability.store._tables.runs import RunTable


@dataclasses.dataclass(frozen=True, slots=True)
class Spilled:
    """A call's result that lives in the blob ``blob`` (read by the table)."""

    blob: str


def _call(*, result: Any, result_blob: str | None, **columns: Any) -> Call:
    value = Spilled(result_blob) if result_blob is not None else load(result)
    return Call(**columns, result=value)


#: the call's columns (the record's fields and where a spilled result lives)
CALLS = Shape(
    _call,
    columns=(
        "id",
        "run_id",
        "agent_no",
        "seq",
        "attempt",
        "kind",
        "name",
        "args",
        "policy",
        "fingerprint",
        "state",
        "result",
        "result_blob",
        "result_digest",
        "created_at",
        "closed_at",
    ),
    json=("args",),
)
#: the columns a call closed on the hot path returns (its result is the caller's own)
CLOSED_COLUMNS = tuple(n for n in CALLS.names if n not in ("result", "result_blob"))


def closed_call(*, context_id: str = "", **columns: Any) -> tuple[Call, str]:
    """A call closed on the hot path (its result set by the caller), and its run's chat."""
    return Call(**columns, result=None), context_id


def closed_shape(*extra: str) -> Shape[tuple[Call, str]]:
    """The rows of a call closed on an engine's hot path (``CLOSED_COLUMNS``, then the
    engine's ``extra`` columns, e.g. the run's chat): (the call, its run's chat)."""
    return Shape(closed_call, columns=(*CLOSED_COLUMNS, *extra), json=("args",))


# The hot path binds by position (faster than by name), in CALLS' order.
_INSERT = f"INSERT INTO calls ({CALLS.select}) VALUES ({CALLS.placeholders()})"


def result_is_large(result_json: str) -> bool:
    """True when a result's JSON must be spilled into a blob (cheap for short text)."""
    return len(result_json) * 4 > RESULT_SPILL_BYTES and (
        len(result_json.encode("utf-8")) > RESULT_SPILL_BYTES
    )


def seq_filter(from_seq: Mapping[int, int]) -> tuple[str, list[Any]]:
    """`` AND (...)``: calls at or past their agent's sequence number in ``from_seq``, and
    every call of an agent it does not name."""
    if not from_seq:
        return "", []
    agents = sorted(from_seq)
    named = ", ".join("?" for _ in agents)
    past = " OR ".join("(agent_no = ? AND seq >= ?)" for _ in agents)
    args: list[Any] = list(agents)
    for agent in agents:
        args.extend((agent, from_seq[agent]))
    return f" AND (agent_no NOT IN ({named}) OR {past})", args


@dataclasses.dataclass(frozen=True, slots=True)
class Closing:
    """A result to store on an open call: its value, canonical JSON and digest."""

    call_id: str
    state: str
    result: Any
    json: str
    digest: str
    now: float


class CallTable(Table):
    def __init__(self, sql: Sql, runs: RunTable, blobs: BlobTable) -> None:
        super().__init__(sql)
        self.runs = runs
        self.blobs = blobs

    def finish(self, call: Call | None) -> Call | None:
        """A call read back, its spilled result (if any) read from its blob."""
        if call is None or not isinstance(call.result, Spilled):
            return call
        blob = call.result.blob
        data = self.blobs.get_many([blob]).get(blob)
        if data is None:
            result = Undecodable("the result's blob is missing", "blob_missing")
        else:
            result = load(data)
        return dataclasses.replace(call, result=result)

    def _result_columns(self, call: Call) -> tuple[str | None, str | None]:
        """The result's text for its column, or (when large) the hash of its blob."""
        if call.result_digest is None:
            return None, None
        text = dump(call.result)
        if not result_is_large(text):
            return text, None
        blob_hash = digest_text(text)
        self.blobs.put(blob_hash, text.encode("utf-8"), call.closed_at or call.created_at)
        return None, blob_hash

    def _row(self, call: Call, args_json: str | None) -> tuple[Any, ...]:
        result, result_blob = self._result_columns(call)
        args = dump(call.args) if args_json is None else args_json
        return CALLS.values(call, args=args, result=result, result_blob=result_blob)

    def insert(self, call: Call) -> None:
        self.sql.run(_INSERT, self._row(call, None))

    def get(self, call_id: str) -> Call | None:
        sql = self.sql
        return self.finish(
            sql.one(CALLS, f"SELECT {CALLS.select} FROM calls WHERE id = ?{sql.lock}", (call_id,))
        )

    def latest_at(self, run_id: str, agent_no: int, seq: int) -> Call | None:
        """The newest attempt at a position, if any."""
        call = self.sql.one(
            CALLS,
            f"SELECT {CALLS.select} FROM calls WHERE run_id = ? AND agent_no = ? AND seq = ?"
            " ORDER BY attempt DESC LIMIT 1",
            (run_id, agent_no, seq),
        )
        return self.finish(call)

    def update(self, call: Call) -> None:
        result, result_blob = self._result_columns(call)
        self.sql.run(
            "UPDATE calls SET state = ?, result = ?, result_blob = ?, result_digest = ?,"
            " closed_at = ? WHERE id = ?",
            (call.state, result, result_blob, call.result_digest, call.closed_at, call.id),
        )

    # The journal's hot path: each folds a check and a write into as few statements as the
    # engine allows, and writes nothing and returns False / None when its condition does
    # not hold (the journal then takes its slow path, which raises the precise error). An
    # engine overrides ``_insert_first`` and ``_close_small`` with its own statements; the
    # defaults here compose the plain ones.
    def insert_if_free(self, call: Call, args_json: str | None = None) -> bool:
        """Insert ``call`` (attempt 1) and bump its run, when the run is active and no call
        exists at the position; False (nothing written) otherwise."""
        # attempt 1 is free exactly when the position has no call (attempts count up from 1)
        if call.attempt == 1 and call.result_digest is None:
            return self._insert_first(self._row(call, args_json), call)
        return CallTable._insert_first(self, (), call)

    def _insert_first(self, row: tuple[Any, ...], call: Call) -> bool:
        """Insert attempt 1 (``row``: its values in CALLS' order) and bump its run, when the
        run is active and the position free."""
        run = self.runs.get(call.run_id)
        if run is None or run.status != RunStatus.ACTIVE:
            return False
        if self.latest_at(call.run_id, call.agent_no, call.seq) is not None:
            return False
        self.insert(call)
        self.runs.update(
            dataclasses.replace(run, version=run.version + 1, updated_at=call.created_at)
        )
        return True

    def close_open(
        self,
        call_id: str,
        state: str,
        result: Any,
        result_json: str,
        result_digest: str,
        now: float,
    ) -> tuple[Call, str] | None:
        """Store the result of an open call of an active run and bump the run; the closed
        call and the run's context id, or None (nothing written)."""
        closing = Closing(call_id, state, result, result_json, result_digest, now)
        if result_is_large(result_json):
            found = CallTable._close_small(self, closing)
        else:
            found = self._close_small(closing)
        if found is None:
            return None
        closed, context_id = found
        return dataclasses.replace(closed, result=result), context_id

    def _close_small(self, closing: Closing) -> tuple[Call, str] | None:
        """Close an open call of an active run with a result that fits its column and bump
        the run; the call (its result as the caller gave it, or left out) and its run's
        ``context_id``, or None (nothing written)."""
        call = self.get(closing.call_id)
        if call is None or call.state != CallState.OPEN:
            return None
        run = self.runs.get(call.run_id)
        if run is None or run.status != RunStatus.ACTIVE:
            return None
        now = closing.now
        done = dataclasses.replace(
            call,
            state=closing.state,
            result=closing.result,
            result_digest=closing.digest,
            closed_at=now,
        )
        self.update(done)
        self.runs.update(dataclasses.replace(run, version=run.version + 1, updated_at=now))
        return done, run.context_id

    def list(
        self,
        run_id: str,
        states: Sequence[str] | None = None,
        from_seq: Mapping[int, int] | None = None,
    ) -> list[Call]:
        """The run's calls in journal order; with ``from_seq`` ({agent_no: seq}) only those
        at or past their agent's sequence number (any seq for an agent not named)."""
        sql = self.sql
        text = f"SELECT {CALLS.select} FROM calls WHERE run_id = ?"
        args: list[Any] = [run_id]
        if states is not None:
            where, more = sql.among("state", list(states))
            text += f" AND {where}"
            args.extend(more)
        if from_seq:
            where, more = seq_filter(from_seq)
            text += where
            args.extend(more)
        calls = sql.all(CALLS, f"{text} ORDER BY {sql.order}", args)
        return [self.finish(c) for c in calls]  # type: ignore[misc]
