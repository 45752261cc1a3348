"""PostgreSQL row <-> record conversion and the SQL of every StoreTx operation.

The same operations as _sqlite_rows.py, in PostgreSQL's dialect: ``%s`` placeholders,
``ON CONFLICT DO NOTHING`` for ``INSERT OR IGNORE``, ``RETURNING id`` for ``lastrowid``,
``IS NOT DISTINCT FROM`` for ``IS``, and the ``no`` identity columns for SQLite's rowid.
The hot-path operations fold check and write into one statement each (data-modifying
CTEs), so an intent or a result costs one round trip besides BEGIN and COMMIT.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from durability.canonical import canonical_json
from durability.integrity import Undecodable, load_json
from durability.records import Call, Conflict, Decision, Event, RetryGrant, Run
from durability.store._sqlite_rows import RESULT_SPILL_BYTES
from durability.store.base import CheckpointRow, DocumentRow, InputRow, StoreTx

_RUN_COLUMNS = (
    "id, context_id, input_id, input_digest, status, version, reason, reason_detail,"
    " recovery_attempts, created_at, updated_at"
)
_CALL_FIELDS = (
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
)
_CALL_COLUMNS = ", ".join(_CALL_FIELDS)
_CALL_TYPES = (
    "text",
    "text",
    "bigint",
    "bigint",
    "bigint",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "double precision",
    "double precision",
)
#: ``%s::type`` for each call column: a SELECT list (unlike VALUES) has no target types.
_CALL_TYPED_PARAMS = ", ".join(f"%s::{t}" for t in _CALL_TYPES)


def _dump(value: Any) -> str:
    return canonical_json(value)


def _load(text: str | None) -> Any:
    return load_json(text)  # damage comes back as an Undecodable marker, never an error


def _marks(n: int) -> str:
    return ",".join(["%s"] * n)


class PostgresTx(StoreTx):
    """One transaction on one connection (``conn``: a psycopg Connection)."""

    def __init__(self, conn: Any, *, locking: bool = False) -> None:
        self.conn = conn
        #: In a write transaction every row read to decide a write is locked as it is read
        #: (``FOR NO KEY UPDATE``): READ COMMITTED then behaves like SQLite's single writer
        #: for each run, call, document and conflict (see durability/store/postgres.py).
        self._lock = " FOR NO KEY UPDATE" if locking else ""

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql, args).fetchone()

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return self.conn.execute(sql, args).fetchall()

    # contexts and inputs
    def ensure_context(self, context_id: str, now: float) -> None:
        self.conn.execute(
            "INSERT INTO contexts (id, created_at) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (context_id, now),
        )

    def get_input(self, input_id: str) -> InputRow | None:
        row = self._one(
            "SELECT input_id, digest, context_id, run_id, kind, created_at FROM inputs"
            " WHERE input_id = %s",
            (input_id,),
        )
        return InputRow(*row) if row else None

    def insert_input(self, row: InputRow) -> None:
        self.conn.execute(
            "INSERT INTO inputs (input_id, digest, context_id, run_id, kind, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (row.input_id, row.digest, row.context_id, row.run_id, row.kind, row.created_at),
        )

    # runs
    @staticmethod
    def _run(row: Any) -> Run:
        values = list(row)
        values[7] = _load(values[7])
        return Run(*values)

    def insert_run(self, run: Run) -> None:
        detail = None if run.reason_detail is None else _dump(run.reason_detail)
        self.conn.execute(
            f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({_marks(11)})",
            (
                run.id,
                run.context_id,
                run.input_id,
                run.input_digest,
                run.status,
                run.version,
                run.reason,
                detail,
                run.recovery_attempts,
                run.created_at,
                run.updated_at,
            ),
        )

    def get_run(self, run_id: str) -> Run | None:
        row = self._one(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = %s{self._lock}", (run_id,))
        return self._run(row) if row else None

    def open_run_for_context(self, context_id: str) -> Run | None:
        row = self._one(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE context_id = %s"
            f" AND status IN ('active', 'needs_attention'){self._lock}",
            (context_id,),
        )
        return self._run(row) if row else None

    def update_run(self, run: Run) -> None:
        detail = None if run.reason_detail is None else _dump(run.reason_detail)
        self.conn.execute(
            "UPDATE runs SET status = %s, version = %s, reason = %s, reason_detail = %s,"
            " recovery_attempts = %s, updated_at = %s WHERE id = %s",
            (
                run.status,
                run.version,
                run.reason,
                detail,
                run.recovery_attempts,
                run.updated_at,
                run.id,
            ),
        )

    def list_runs(
        self, statuses: Sequence[str] | None, context_id: str | None, limit: int
    ) -> list[Run]:
        where: list[str] = []
        args: list[Any] = []
        if statuses is not None:
            where.append("status = ANY(%s)")
            args.append(list(statuses))
        if context_id is not None:
            where.append("context_id = %s")
            args.append(context_id)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self._all(
            f"SELECT {_RUN_COLUMNS} FROM runs {clause} ORDER BY created_at DESC, no DESC LIMIT %s",
            [*args, limit],
        )
        return [self._run(r) for r in rows]

    def delete_run(self, run_id: str) -> None:
        self.conn.execute("DELETE FROM runs WHERE id = %s", (run_id,))

    def contexts_with_runs(self, context_ids: Sequence[str]) -> set[str]:
        """The given chats that still have at least one run (wip/7-admission's retention
        adds this to StoreTx)."""
        ids = list(dict.fromkeys(context_ids))
        if not ids:
            return set()
        rows = self._all("SELECT DISTINCT context_id FROM runs WHERE context_id = ANY(%s)", (ids,))
        return {str(r[0]) for r in rows}

    # calls
    def _call(self, row: Any) -> Call:
        (id_, run_id, agent_no, seq, attempt, kind, name, args, policy, fp, state) = row[:11]
        result_text, result_blob, result_digest, created_at, closed_at = row[11:16]
        result: Any
        if result_blob is not None:
            data = self.get_blobs([result_blob]).get(result_blob)
            result = Undecodable("the result's blob is missing", "blob_missing")
            if data is not None:
                result = load_json(data)
        else:
            result = _load(result_text)
        values = (id_, run_id, agent_no, seq, attempt, kind, name, _load(args), policy, fp)
        return Call(*values, state, result, result_digest, created_at, closed_at)

    def _result_columns(self, call: Call) -> tuple[str | None, str | None]:
        if call.result_digest is None:
            return None, None
        text = _dump(call.result)
        if len(text.encode("utf-8")) <= RESULT_SPILL_BYTES:
            return text, None
        from durability.canonical import digest_text

        blob_hash = digest_text(text)
        self.put_blob(blob_hash, text.encode("utf-8"), call.closed_at or call.created_at)
        return None, blob_hash

    def _call_values(self, call: Call, args_json: str | None = None) -> tuple[Any, ...]:
        result, result_blob = self._result_columns(call)
        return (
            call.id,
            call.run_id,
            call.agent_no,
            call.seq,
            call.attempt,
            call.kind,
            call.name,
            _dump(call.args) if args_json is None else args_json,
            call.policy,
            call.fingerprint,
            call.state,
            result,
            result_blob,
            call.result_digest,
            call.created_at,
            call.closed_at,
        )

    def insert_call(self, call: Call) -> None:
        self.conn.execute(
            f"INSERT INTO calls ({_CALL_COLUMNS}) VALUES ({_marks(16)})", self._call_values(call)
        )

    def get_call(self, call_id: str) -> Call | None:
        row = self._one(f"SELECT {_CALL_COLUMNS} FROM calls WHERE id = %s{self._lock}", (call_id,))
        return self._call(row) if row else None

    def latest_call_at(self, run_id: str, agent_no: int, seq: int) -> Call | None:
        row = self._one(
            f"SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = %s AND agent_no = %s AND seq = %s"
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

    def bump_active_run(self, run_id: str, now: float) -> str | None:
        row = self._one(
            "UPDATE runs SET version = version + 1, updated_at = %s WHERE id = %s"
            " AND status = 'active' RETURNING context_id",
            (now, run_id),
        )
        return row[0] if row else None

    def insert_call_if_free(self, call: Call, args_json: str | None = None) -> bool:
        if call.attempt != 1 or call.result_digest is not None:
            return super().insert_call_if_free(call, args_json)
        row = self._one(
            "WITH bumped AS (UPDATE runs SET version = version + 1, updated_at = %s"
            " WHERE id = %s AND status = 'active' AND NOT EXISTS (SELECT 1 FROM calls"
            " WHERE run_id = %s AND agent_no = %s AND seq = %s) RETURNING id)"
            f" INSERT INTO calls ({_CALL_COLUMNS}) SELECT {_CALL_TYPED_PARAMS} FROM bumped"
            " RETURNING id",
            (
                call.created_at,
                call.run_id,
                call.run_id,
                call.agent_no,
                call.seq,
                *self._call_values(call, args_json),
            ),
        )
        return row is not None

    def close_open_call(
        self,
        call_id: str,
        state: str,
        result: Any,
        result_json: str,
        result_digest: str,
        now: float,
    ) -> tuple[Call, str] | None:
        if len(result_json) * 4 > RESULT_SPILL_BYTES and (
            len(result_json.encode("utf-8")) > RESULT_SPILL_BYTES
        ):
            return super().close_open_call(call_id, state, result, result_json, result_digest, now)
        row = self._one(
            "WITH closed AS (UPDATE calls SET state = %s, result = %s, result_blob = NULL,"
            " result_digest = %s, closed_at = %s WHERE id = %s AND state = 'open' AND EXISTS"
            " (SELECT 1 FROM runs WHERE runs.id = calls.run_id AND runs.status = 'active')"
            f" RETURNING {_CALL_COLUMNS}), bumped AS (UPDATE runs SET version = version + 1,"
            " updated_at = %s FROM closed WHERE runs.id = closed.run_id RETURNING"
            " runs.context_id) SELECT closed.*, bumped.context_id FROM closed, bumped",
            (state, result_json, result_digest, now, call_id, now),
        )
        if row is None:
            return None
        (id_, run_id, agent_no, seq, attempt, kind, name, args, policy, fp) = row[:10]
        call = Call(
            id_,
            run_id,
            agent_no,
            seq,
            attempt,
            kind,
            name,
            _load(args),
            policy,
            fp,
            state,
            result,
            result_digest,
            row[14],
            now,
        )
        return call, str(row[16])

    def list_calls(self, run_id: str, states: Sequence[str] | None = None) -> list[Call]:
        sql = f"SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = %s"
        args: list[Any] = [run_id]
        if states is not None:
            sql += " AND state = ANY(%s)"
            args.append(list(states))
        return [self._call(r) for r in self._all(sql + " ORDER BY no", args)]

    # blobs
    def put_blob(self, blob_hash: str, data: bytes, now: float) -> bool:
        row = self._one(
            "INSERT INTO blobs (hash, size, data, created_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING RETURNING hash",
            (blob_hash, len(data), data, now),
        )
        return row is not None

    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        rows = self._all("SELECT hash, data FROM blobs WHERE hash = ANY(%s)", (wanted,))
        return {h: bytes(d) for h, d in rows}

    # checkpoints
    def insert_checkpoint(
        self, run_id: str, context_id: str, seq: int | None, body: str, digest: str, now: float
    ) -> int:
        row = self._one(
            "INSERT INTO checkpoints (run_id, context_id, seq, body, digest, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (run_id, context_id, seq, body, digest, now),
        )
        return int(row[0])

    _CHECKPOINT_COLUMNS = "id, run_id, context_id, seq, body, digest, created_at"

    def latest_checkpoint(
        self, *, run_id: str | None = None, context_id: str | None = None
    ) -> CheckpointRow | None:
        columns = self._CHECKPOINT_COLUMNS
        if run_id is not None:
            row = self._one(
                f"SELECT {columns} FROM checkpoints WHERE run_id = %s ORDER BY id DESC LIMIT 1",
                (run_id,),
            )
        else:  # the newest of the chat's runs' newest checkpoints
            row = self._one(
                f"SELECT {columns} FROM checkpoints WHERE id = (SELECT MAX((SELECT MAX(c.id)"
                " FROM checkpoints c WHERE c.run_id = r.id)) FROM runs r WHERE r.context_id = %s)",
                (context_id,),
            )
        return CheckpointRow(*row) if row else None

    def get_checkpoint(self, checkpoint_id: int) -> CheckpointRow | None:
        row = self._one(
            f"SELECT {self._CHECKPOINT_COLUMNS} FROM checkpoints WHERE id = %s", (checkpoint_id,)
        )
        return CheckpointRow(*row) if row else None

    # documents and conflicts
    def get_document(self, context_id: str, kind: str) -> DocumentRow | None:
        row = self._one(
            "SELECT context_id, kind, revision, body, digest, updated_at, updated_by"
            f" FROM documents WHERE context_id = %s AND kind = %s{self._lock}",
            (context_id, kind),
        )
        return DocumentRow(*row) if row else None

    def list_documents(self) -> list[DocumentRow]:
        rows = self._all(
            "SELECT context_id, kind, revision, body, digest, updated_at, updated_by"
            " FROM documents ORDER BY context_id, kind"
        )
        return [DocumentRow(*r) for r in rows]

    def put_document(self, row: DocumentRow) -> None:
        self.conn.execute(
            "INSERT INTO documents (context_id, kind, revision, body, digest, updated_at,"
            " updated_by) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (context_id, kind)"
            " DO UPDATE SET revision = excluded.revision, body = excluded.body,"
            " digest = excluded.digest, updated_at = excluded.updated_at,"
            " updated_by = excluded.updated_by",
            (
                row.context_id,
                row.kind,
                row.revision,
                row.body,
                row.digest,
                row.updated_at,
                row.updated_by,
            ),
        )

    _CONFLICT_COLUMNS = (
        "id, context_id, kind, expected_revision, actual_revision, proposed, actor, created_at,"
        " resolved_at, resolution, resolved_by"
    )

    @staticmethod
    def _conflict(row: Any) -> Conflict:
        values = list(row)
        values[5] = _load(values[5])
        return Conflict(*values)

    def insert_conflict(
        self,
        context_id: str,
        kind: str,
        expected_revision: int,
        actual_revision: int,
        proposed: object,
        actor: str,
        now: float,
    ) -> int:
        row = self._one(
            "INSERT INTO conflicts (context_id, kind, expected_revision, actual_revision,"
            " proposed, actor, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (context_id, kind, expected_revision, actual_revision, _dump(proposed), actor, now),
        )
        return int(row[0])

    def get_conflict(self, conflict_id: int) -> Conflict | None:
        row = self._one(
            f"SELECT {self._CONFLICT_COLUMNS} FROM conflicts WHERE id = %s{self._lock}",
            (conflict_id,),
        )
        return self._conflict(row) if row else None

    def list_conflicts(self, context_id: str | None, unresolved_only: bool) -> list[Conflict]:
        where: list[str] = []
        args: list[Any] = []
        if context_id is not None:
            where.append("context_id = %s")
            args.append(context_id)
        if unresolved_only:
            where.append("resolved_at IS NULL")
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self._all(
            f"SELECT {self._CONFLICT_COLUMNS} FROM conflicts {clause} ORDER BY id", args
        )
        return [self._conflict(r) for r in rows]

    def resolve_conflict(self, conflict_id: int, resolution: str, actor: str, now: float) -> None:
        self.conn.execute(
            "UPDATE conflicts SET resolved_at = %s, resolution = %s, resolved_by = %s"
            " WHERE id = %s",
            (now, resolution, actor, conflict_id),
        )

    # decisions and retry grants
    _DECISION_COLUMNS = "id, run_id, call_id, decision, version, actor, note, created_at"

    def insert_decision(self, decision: Decision) -> int:
        row = self._one(
            "INSERT INTO decisions (run_id, call_id, decision, version, actor, note, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (
                decision.run_id,
                decision.call_id,
                decision.decision,
                decision.version,
                decision.actor,
                decision.note,
                decision.created_at,
            ),
        )
        return int(row[0])

    def decision_on_version(self, run_id: str, version: int) -> Decision | None:
        row = self._one(
            f"SELECT {self._DECISION_COLUMNS} FROM decisions WHERE run_id = %s AND version = %s",
            (run_id, version),
        )
        return Decision(*row) if row else None

    def list_decisions(self, run_id: str) -> list[Decision]:
        rows = self._all(
            f"SELECT {self._DECISION_COLUMNS} FROM decisions WHERE run_id = %s ORDER BY id",
            (run_id,),
        )
        return [Decision(*r) for r in rows]

    def insert_grant(self, run_id: str, attempts: int, actor: str, now: float) -> int:
        row = self._one(
            "INSERT INTO retry_grants (run_id, attempts, remaining, actor, created_at)"
            " VALUES (%s, %s, %s, %s, %s) RETURNING id",
            (run_id, attempts, attempts, actor, now),
        )
        return int(row[0])

    def consume_grant(self, run_id: str) -> bool:
        row = self._one(
            "UPDATE retry_grants SET remaining = remaining - 1 WHERE id = (SELECT id FROM"
            " retry_grants WHERE run_id = %s AND remaining > 0 ORDER BY id LIMIT 1) RETURNING id",
            (run_id,),
        )
        return row is not None

    def list_grants(self, run_id: str) -> list[RetryGrant]:
        rows = self._all(
            "SELECT id, run_id, attempts, remaining, actor, created_at FROM retry_grants"
            " WHERE run_id = %s ORDER BY id",
            (run_id,),
        )
        return [RetryGrant(*r) for r in rows]

    # events
    def insert_event(
        self,
        context_id: str,
        run_id: str | None,
        type: str,
        payload: object,
        now: float,
        digest: str,
    ) -> int:
        row = self._one(
            "INSERT INTO events (context_id, run_id, type, payload, created_at, digest)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (context_id, run_id, type, _dump(payload), now, digest),
        )
        return int(row[0])

    def list_events(
        self, context_id: str | None, run_id: str | None, after_id: int, limit: int
    ) -> list[Event]:
        where: list[str] = ["id > %s"]
        args: list[Any] = [after_id]
        if context_id is not None:
            where.append("context_id = %s")
            args.append(context_id)
        if run_id is not None:
            where.append("run_id = %s")
            args.append(run_id)
        rows = self._all(
            "SELECT id, context_id, run_id, type, payload, created_at, digest FROM events"
            f" WHERE {' AND '.join(where)} ORDER BY id LIMIT %s",
            [*args, limit],
        )
        return [Event(r[0], r[1], r[2], r[3], _load(r[4]), r[5], r[6]) for r in rows]

    # claims (shared workers): see durability/cluster.py
    def lock_fence(
        self, run_id: str | None = None, call_id: str | None = None
    ) -> tuple[str, int | None] | None:
        if run_id is not None:
            row = self._one("SELECT id, fence FROM runs WHERE id = %s FOR NO KEY UPDATE", (run_id,))
        else:
            row = self._one(
                "SELECT r.id, r.fence FROM runs r JOIN calls c ON c.run_id = r.id"
                " WHERE c.id = %s FOR NO KEY UPDATE OF r",
                (call_id,),
            )
        return (str(row[0]), row[1]) if row else None

    def insert_claim(self, run_id: str, worker_id: str, lease_seconds: float) -> Any:
        from durability.store._postgres_claims import claim_new_run

        row = self._one("SELECT context_id FROM runs WHERE id = %s", (run_id,))
        return claim_new_run(self.conn, run_id, str(row[0]), worker_id, lease_seconds)
