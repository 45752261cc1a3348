"""The checkpoints table."""

from __future__ import annotations

from durability.store._rows import CHECKPOINTS, checkpoint_row
from durability.store._sql import SqlTx
from durability.store.base import CheckpointRow

_BY_RUN = f"SELECT {CHECKPOINTS.select} FROM checkpoints WHERE run_id = ? ORDER BY id DESC LIMIT 1"
# the newest of the chat's runs' newest checkpoints: one index seek per run
_BY_CONTEXT = (
    f"SELECT {CHECKPOINTS.select} FROM checkpoints WHERE id = (SELECT MAX((SELECT MAX(c.id)"
    " FROM checkpoints c WHERE c.run_id = r.id)) FROM runs r WHERE r.context_id = ?)"
)


class CheckpointRows(SqlTx):
    def insert_checkpoint(
        self, run_id: str, context_id: str, seq: int | None, body: str, digest: str, now: float
    ) -> int:
        return self.insert_id(
            "INSERT INTO checkpoints (run_id, context_id, seq, body, digest, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, context_id, seq, body, digest, now),
        )

    def latest_checkpoint(
        self, *, run_id: str | None = None, context_id: str | None = None
    ) -> CheckpointRow | None:
        if run_id is not None:
            row = self.one(CHECKPOINTS, _BY_RUN, (run_id,))
        else:
            row = self.one(CHECKPOINTS, _BY_CONTEXT, (context_id,))
        return checkpoint_row(row) if row else None

    def get_checkpoint(self, checkpoint_id: int) -> CheckpointRow | None:
        row = self.one(
            CHECKPOINTS,
            f"SELECT {CHECKPOINTS.select} FROM checkpoints WHERE id = ?",
            (checkpoint_id,),
        )
        return checkpoint_row(row) if row else None
