"""The contexts and inputs tables (chats, and the input ids bound to their runs)."""

from __future__ import annotations

from durability.store._rows import INPUTS, input_row
from durability.store._sql import SqlTx
from durability.store.base import InputRow


class InputRows(SqlTx):
    def ensure_context(self, context_id: str, now: float) -> None:
        self.run(
            "INSERT INTO contexts (id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (context_id, now),
        )

    def get_input(self, input_id: str) -> InputRow | None:
        row = self.one(
            INPUTS, f"SELECT {INPUTS.select} FROM inputs WHERE input_id = ?", (input_id,)
        )
        return input_row(row) if row else None

    def insert_input(self, row: InputRow) -> None:
        self.run(
            "INSERT INTO inputs (input_id, digest, context_id, run_id, kind, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (row.input_id, row.digest, row.context_id, row.run_id, row.kind, row.created_at),
        )
