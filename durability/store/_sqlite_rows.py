"""SQLite row <-> record conversion and the SQL of every StoreTx operation."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from durability.canonical import canonical_json, digest_text
from durability.integrity import Undecodable, load_json
from durability.records import Call, Conflict, Decision, Event, RetryGrant, Run
from durability.store.base import CheckpointRow, DocumentRow, InputRow, StoreTx

#: Results whose JSON is larger than this are spilled into the blobs table.
RESULT_SPILL_BYTES = 256 * 1024

_RUN_COLUMNS = (
    "id, context_id, input_id, input_digest, status, version, reason, reason_detail,"
    " recovery_attempts, created_at, updated_at"
)
_CALL_COLUMNS = (
    "id, run_id, agent_no, seq, attempt, kind, name, args, policy, fingerprint, state,"
    " result, result_blob, result_digest, created_at, closed_at"
)


def _dump(value: Any) -> str:
    return canonical_json(value)


def _load(text: str | None) -> Any:
    return load_json(text)  # damage comes back as an Undecodable marker, never an error


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


class SqliteTx(StoreTx):
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql, args).fetchone()

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return self.conn.execute(sql, args).fetchall()

    # contexts and inputs
    def ensure_context(self, context_id: str, now: float) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO contexts (id, created_at) VALUES (?, ?)", (context_id, now)
        )

    def get_input(self, input_id: str) -> InputRow | None:
        row = self._one(
            "SELECT input_id, digest, context_id, run_id, kind, created_at FROM inputs"
            " WHERE input_id = ?",
            (input_id,),
        )
        return InputRow(*row) if row else None

    def insert_input(self, row: InputRow) -> None:
        self.conn.execute(
            "INSERT INTO inputs (input_id, digest, context_id, run_id, kind, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (row.input_id, row.digest, row.context_id, row.run_id, row.kind, row.created_at),
        )

    # runs
    @staticmethod
    def _run(row: Any) -> Run:
        values = list(row)
        values[7] = _load(values[7])
        return Run(*values)

    def insert_run(self, run: Run) -> None:
        self.conn.execute(
            f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({_placeholders(11)})",
            (
                run.id,
                run.context_id,
                run.input_id,
                run.input_digest,
                run.status,
                run.version,
                run.reason,
                None if run.reason_detail is None else _dump(run.reason_detail),
                run.recovery_attempts,
                run.created_at,
                run.updated_at,
            ),
        )

    def get_run(self, run_id: str) -> Run | None:
        row = self._one(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        return self._run(row) if row else None

    def open_run_for_context(self, context_id: str) -> Run | None:
        row = self._one(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE context_id = ?"
            " AND status IN ('active', 'needs_attention')",
            (context_id,),
        )
        return self._run(row) if row else None

    def update_run(self, run: Run) -> None:
        detail = None if run.reason_detail is None else _dump(run.reason_detail)
        # The common change is a version bump alone (every intent, result, checkpoint):
        # set only version and updated_at, which no index covers, so one page is written.
        cur = self.conn.execute(
            "UPDATE runs SET version = ?, updated_at = ? WHERE id = ? AND status = ?"
            " AND reason IS ? AND reason_detail IS ? AND recovery_attempts = ?",
            (run.version, run.updated_at, run.id, run.status, run.reason, detail,
             run.recovery_attempts),
        )  # fmt: skip
        if cur.rowcount:
            return
        self.conn.execute(
            "UPDATE runs SET status = ?, version = ?, reason = ?, reason_detail = ?,"
            " recovery_attempts = ?, updated_at = ? WHERE id = ?",
            (run.status, run.version, run.reason, detail, run.recovery_attempts,
             run.updated_at, run.id),
        )  # fmt: skip

    def list_runs(
        self, statuses: Sequence[str] | None, context_id: str | None, limit: int
    ) -> list[Run]:
        where: list[str] = []
        args: list[Any] = []
        if statuses is not None:
            where.append(f"status IN ({_placeholders(len(statuses))})")
            args.extend(statuses)
        if context_id is not None:
            where.append("context_id = ?")
            args.append(context_id)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self._all(
            f"SELECT {_RUN_COLUMNS} FROM runs {clause}"
            " ORDER BY created_at DESC, rowid DESC LIMIT ?",
            [*args, limit],
        )
        return [self._run(r) for r in rows]

    def delete_run(self, run_id: str) -> None:
        self.conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    def contexts_with_runs(self, context_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        ids = list(dict.fromkeys(context_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self._all(
                "SELECT DISTINCT context_id FROM runs"
                f" WHERE context_id IN ({_placeholders(len(chunk))})",
                chunk,
            )
            found.update(str(r[0]) for r in rows)
        return found

    # calls
    def _call(self, row: Any) -> Call:
        (id_, run_id, agent_no, seq, attempt, kind, name, args, policy, fp, state) = row[:11]
        result_text, result_blob, result_digest, created_at, closed_at = row[11:]
        result: Any
        if result_blob is not None:
            data = self.get_blobs([result_blob]).get(result_blob)
            result = Undecodable("the result's blob is missing", "blob_missing")
            if data is not None:
                result = load_json(data)
        else:
            result = _load(result_text)
        return Call(
            id_, run_id, agent_no, seq, attempt, kind, name, _load(args), policy, fp, state,
            result, result_digest, created_at, closed_at,
        )  # fmt: skip

    def _result_columns(self, call: Call) -> tuple[str | None, str | None]:
        if call.result_digest is None:
            return None, None
        text = _dump(call.result)
        if len(text.encode("utf-8")) <= RESULT_SPILL_BYTES:
            return text, None
        blob_hash = digest_text(text)
        self.put_blob(blob_hash, text.encode("utf-8"), call.closed_at or call.created_at)
        return None, blob_hash

    def insert_call(self, call: Call) -> None:
        result, result_blob = self._result_columns(call)
        self.conn.execute(
            f"INSERT INTO calls ({_CALL_COLUMNS}) VALUES ({_placeholders(16)})",
            (
                call.id, call.run_id, call.agent_no, call.seq, call.attempt, call.kind,
                call.name, _dump(call.args), call.policy, call.fingerprint, call.state,
                result, result_blob, call.result_digest, call.created_at, call.closed_at,
            ),
        )  # fmt: skip

    def get_call(self, call_id: str) -> Call | None:
        row = self._one(f"SELECT {_CALL_COLUMNS} FROM calls WHERE id = ?", (call_id,))
        return self._call(row) if row else None

    def latest_call_at(self, run_id: str, agent_no: int, seq: int) -> Call | None:
        row = self._one(
            f"SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = ? AND agent_no = ? AND seq = ?"
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

    def bump_active_run(self, run_id: str, now: float) -> str | None:
        rows = self.conn.execute(
            "UPDATE runs SET version = version + 1, updated_at = ? WHERE id = ?"
            " AND status = 'active' RETURNING context_id",
            (now, run_id),
        ).fetchall()
        return rows[0][0] if rows else None

    def insert_call_if_free(self, call: Call, args_json: str | None = None) -> bool:
        # attempt 1 is free exactly when the position has no call (attempts count up from 1)
        if call.attempt != 1 or call.result_digest is not None:
            return super().insert_call_if_free(call, args_json)
        cur = self.conn.execute(
            f"INSERT OR IGNORE INTO calls ({_CALL_COLUMNS}) SELECT {_placeholders(16)}"
            " WHERE EXISTS (SELECT 1 FROM runs WHERE id = ? AND status = 'active')",
            (
                call.id, call.run_id, call.agent_no, call.seq, call.attempt, call.kind,
                call.name, _dump(call.args) if args_json is None else args_json, call.policy,
                call.fingerprint, call.state, None, None, None, call.created_at, None,
                call.run_id,
            ),
        )  # fmt: skip
        if cur.rowcount != 1:
            return False
        self.conn.execute(
            "UPDATE runs SET version = version + 1, updated_at = ? WHERE id = ?",
            (call.created_at, call.run_id),
        )
        return True

    def close_open_call(
        self, call_id: str, state: str, result: Any, result_json: str, result_digest: str,
        now: float,
    ) -> tuple[Call, str] | None:  # fmt: skip
        if len(result_json) * 4 > RESULT_SPILL_BYTES and (
            len(result_json.encode("utf-8")) > RESULT_SPILL_BYTES
        ):
            return super().close_open_call(call_id, state, result, result_json, result_digest, now)
        rows = self.conn.execute(
            "UPDATE calls SET state = ?, result = ?, result_blob = NULL, result_digest = ?,"
            " closed_at = ? WHERE id = ? AND state = 'open' AND EXISTS (SELECT 1 FROM runs"
            f" WHERE runs.id = calls.run_id AND runs.status = 'active') RETURNING {_CALL_COLUMNS}",
            (state, result_json, result_digest, now, call_id),
        ).fetchall()
        if not rows:
            return None
        row = rows[0]
        context_id = self.bump_active_run(row[1], now)
        (id_, run_id, agent_no, seq, attempt, kind, name, args, policy, fp) = row[:10]
        call = Call(
            id_, run_id, agent_no, seq, attempt, kind, name, _load(args), policy, fp, state,
            result, result_digest, row[14], now,
        )  # fmt: skip
        return call, str(context_id)

    def list_calls(self, run_id: str, states: Sequence[str] | None = None) -> list[Call]:
        sql = f"SELECT {_CALL_COLUMNS} FROM calls WHERE run_id = ?"
        args: list[Any] = [run_id]
        if states is not None:
            sql += f" AND state IN ({_placeholders(len(states))})"
            args.extend(states)
        rows = self._all(sql + " ORDER BY rowid", args)
        return [self._call(r) for r in rows]

    # blobs
    def put_blob(self, blob_hash: str, data: bytes, now: float) -> bool:
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO blobs (hash, size, data, created_at) VALUES (?, ?, ?, ?)",
            (blob_hash, len(data), data, now),
        )
        return cur.rowcount == 1

    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, bytes] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = self._all(
                f"SELECT hash, data FROM blobs WHERE hash IN ({_placeholders(len(chunk))})",
                chunk,
            )
            found.update((h, bytes(d)) for h, d in rows)
        return found

    # checkpoints
    def insert_checkpoint(
        self, run_id: str, context_id: str, seq: int | None, body: str, digest: str, now: float
    ) -> int:
        cur = self.conn.execute(
            "INSERT INTO checkpoints (run_id, context_id, seq, body, digest, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, context_id, seq, body, digest, now),
        )
        return int(cur.lastrowid or 0)

    def latest_checkpoint(
        self, *, run_id: str | None = None, context_id: str | None = None
    ) -> CheckpointRow | None:
        columns = "id, run_id, context_id, seq, body, digest, created_at"
        if run_id is not None:
            row = self._one(
                f"SELECT {columns} FROM checkpoints WHERE run_id = ? ORDER BY id DESC LIMIT 1",
                (run_id,),
            )
        else:  # the newest of the chat's runs' newest checkpoints: one index seek per run
            row = self._one(
                f"SELECT {columns} FROM checkpoints WHERE id = (SELECT MAX((SELECT MAX(c.id)"
                " FROM checkpoints c WHERE c.run_id = r.id)) FROM runs r WHERE r.context_id = ?)",
                (context_id,),
            )
        return CheckpointRow(*row) if row else None

    def get_checkpoint(self, checkpoint_id: int) -> CheckpointRow | None:
        row = self._one(
            "SELECT id, run_id, context_id, seq, body, digest, created_at FROM checkpoints"
            " WHERE id = ?",
            (checkpoint_id,),
        )
        return CheckpointRow(*row) if row else None

    # documents and conflicts
    def get_document(self, context_id: str, kind: str) -> DocumentRow | None:
        row = self._one(
            "SELECT context_id, kind, revision, body, digest, updated_at, updated_by"
            " FROM documents WHERE context_id = ? AND kind = ?",
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
            " updated_by) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (context_id, kind) DO UPDATE"
            " SET revision = excluded.revision, body = excluded.body, digest = excluded.digest,"
            " updated_at = excluded.updated_at, updated_by = excluded.updated_by",
            (row.context_id, row.kind, row.revision, row.body, row.digest, row.updated_at,
             row.updated_by),
        )  # fmt: skip

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
        cur = self.conn.execute(
            "INSERT INTO conflicts (context_id, kind, expected_revision, actual_revision,"
            " proposed, actor, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (context_id, kind, expected_revision, actual_revision, _dump(proposed), actor, now),
        )
        return int(cur.lastrowid or 0)

    def get_conflict(self, conflict_id: int) -> Conflict | None:
        row = self._one(
            f"SELECT {self._CONFLICT_COLUMNS} FROM conflicts WHERE id = ?", (conflict_id,)
        )
        return self._conflict(row) if row else None

    def list_conflicts(self, context_id: str | None, unresolved_only: bool) -> list[Conflict]:
        where: list[str] = []
        args: list[Any] = []
        if context_id is not None:
            where.append("context_id = ?")
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
            "UPDATE conflicts SET resolved_at = ?, resolution = ?, resolved_by = ? WHERE id = ?",
            (now, resolution, actor, conflict_id),
        )

    # decisions and retry grants
    _DECISION_COLUMNS = "id, run_id, call_id, decision, version, actor, note, created_at"

    def insert_decision(self, decision: Decision) -> int:
        cur = self.conn.execute(
            "INSERT INTO decisions (run_id, call_id, decision, version, actor, note, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (decision.run_id, decision.call_id, decision.decision, decision.version,
             decision.actor, decision.note, decision.created_at),
        )  # fmt: skip
        return int(cur.lastrowid or 0)

    def decision_on_version(self, run_id: str, version: int) -> Decision | None:
        row = self._one(
            f"SELECT {self._DECISION_COLUMNS} FROM decisions WHERE run_id = ? AND version = ?",
            (run_id, version),
        )
        return Decision(*row) if row else None

    def list_decisions(self, run_id: str) -> list[Decision]:
        rows = self._all(
            f"SELECT {self._DECISION_COLUMNS} FROM decisions WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [Decision(*r) for r in rows]

    def insert_grant(self, run_id: str, attempts: int, actor: str, now: float) -> int:
        cur = self.conn.execute(
            "INSERT INTO retry_grants (run_id, attempts, remaining, actor, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (run_id, attempts, attempts, actor, now),
        )
        return int(cur.lastrowid or 0)

    def consume_grant(self, run_id: str) -> bool:
        row = self._one(
            "SELECT id FROM retry_grants WHERE run_id = ? AND remaining > 0 ORDER BY id LIMIT 1",
            (run_id,),
        )
        if row is None:
            return False
        self.conn.execute(
            "UPDATE retry_grants SET remaining = remaining - 1 WHERE id = ?", (row[0],)
        )
        return True

    def list_grants(self, run_id: str) -> list[RetryGrant]:
        rows = self._all(
            "SELECT id, run_id, attempts, remaining, actor, created_at FROM retry_grants"
            " WHERE run_id = ? ORDER BY id",
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
        cur = self.conn.execute(
            "INSERT INTO events (context_id, run_id, type, payload, created_at, digest)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (context_id, run_id, type, _dump(payload), now, digest),
        )
        return int(cur.lastrowid or 0)

    def list_events(
        self, context_id: str | None, run_id: str | None, after_id: int, limit: int
    ) -> list[Event]:
        where: list[str] = ["id > ?"]
        args: list[Any] = [after_id]
        if context_id is not None:
            where.append("context_id = ?")
            args.append(context_id)
        if run_id is not None:
            where.append("run_id = ?")
            args.append(run_id)
        rows = self._all(
            "SELECT id, context_id, run_id, type, payload, created_at, digest FROM events"
            f" WHERE {' AND '.join(where)} ORDER BY id LIMIT ?",
            [*args, limit],
        )
        return [Event(r[0], r[1], r[2], r[3], _load(r[4]), r[5], r[6]) for r in rows]
