"""The contexts and inputs tables (chats, and the input ids bound to their runs)."""

from __future__ import annotations

from durability.store._rows import INPUTS, input_row
from durability.store._sqlite.base import SqliteBase
from durability.store.base import InputRow


class InputRows(SqliteBase):
    def ensure_context(self, context_id: str, now: float) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO contexts (id, created_at) VALUES (?, ?)", (context_id, now)
        )

    def get_input(self, input_id: str) -> InputRow | None:
        row = self.one(
            INPUTS, f"SELECT {INPUTS.select} FROM inputs WHERE input_id = ?", (input_id,)
        )
        return input_row(row) if row else None

    def insert_input(self, row: InputRow) -> None:
        self.conn.execute(
            "INSERT INTO inputs (input_id, digest, context_id, run_id, kind, created_at)"
            " VALUES (:input_id, :digest, :context_id, :run_id, :kind, :created_at)",
            {
                "input_id": row.input_id,
                "digest": row.digest,
                "context_id": row.context_id,
                "run_id": row.run_id,
                "kind": row.kind,
                "created_at": row.created_at,
            },
        )
