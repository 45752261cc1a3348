"""The checkpoints table."""

from __future__ import annotations

from durability.store._shapes import Shape
from durability.store._sql import Table
from durability.store.rows import CheckpointRow

CHECKPOINTS = Shape(CheckpointRow)
_BY_RUN = f"SELECT {CHECKPOINTS.select} FROM checkpoints WHERE run_id = ? ORDER BY id DESC LIMIT 1"
# the newest of the chat's runs' newest checkpoints: one index seek per run
_BY_CONTEXT = (
    f"SELECT {CHECKPOINTS.select} FROM checkpoints WHERE id = (SELECT MAX((SELECT MAX(c.id)"
    " FROM checkpoints c WHERE c.run_id = r.id)) FROM runs r WHERE r.context_id = ?)"
)

# each run's newest checkpoint with its chat: one index seek per run
_NEWEST_OF_RUNS = (
    "SELECT r.context_id, c.id, c.body, c.digest FROM runs r JOIN checkpoints c"
    " ON c.id = (SELECT MAX(c2.id) FROM checkpoints c2 WHERE c2.run_id = r.id)"
)


class CheckpointTable(Table):
    def newest_per_chat(self) -> dict[str, tuple[int, str, str]]:
        """Every chat's newest checkpoint over all its runs: (id, body, digest) by chat."""
        newest: dict[str, tuple[int, str, str]] = {}
        for context_id, checkpoint_id, body, digest in self.sql.run(_NEWEST_OF_RUNS).fetchall():
            known = newest.get(context_id)
            if known is None or checkpoint_id > known[0]:
                newest[context_id] = (int(checkpoint_id), str(body), str(digest))
        return newest

    def insert(
        self, run_id: str, context_id: str, seq: int | None, body: str, digest: str, now: float
    ) -> int:
        return self.sql.insert_id(
            "INSERT INTO checkpoints (run_id, context_id, seq, body, digest, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, context_id, seq, body, digest, now),
        )

    def latest(
        self, *, run_id: str | None = None, context_id: str | None = None
    ) -> CheckpointRow | None:
        """The newest checkpoint of a run, or of a chat over all its runs."""
        if run_id is not None:
            return self.sql.one(CHECKPOINTS, _BY_RUN, (run_id,))
        return self.sql.one(CHECKPOINTS, _BY_CONTEXT, (context_id,))

    def get(self, checkpoint_id: int) -> CheckpointRow | None:
        return self.sql.one(
            CHECKPOINTS,
            f"SELECT {CHECKPOINTS.select} FROM checkpoints WHERE id = ?",
            (checkpoint_id,),
        )
