"""SQLite's own update of a run: a version bump alone writes one page."""

from __future__ import annotations

from durability.records import Run
from durability.store._tables.runs import RunRows, run_change

# The common change is a version bump alone (every intent, result, checkpoint): set only
# version and updated_at, which no index covers, so one page is written.
_BUMP = (
    "UPDATE runs SET version = ?, updated_at = ? WHERE id = ? AND status = ? AND reason IS ?"
    " AND reason_detail IS ? AND recovery_attempts = ?"
)


class SqliteRunRows(RunRows):
    def update_run(self, run: Run) -> None:
        status, version, reason, detail, attempts, updated_at, run_id = run_change(run)
        bump = (version, updated_at, run_id, status, reason, detail, attempts)
        if self.conn.execute(_BUMP, bump).rowcount:
            return
        super().update_run(run)
