"""Retention: which finished runs to forget, and forgetting them with their unused blobs.

A finished run (completed, stopped, failed) is kept while it is among the newest
``keep_runs`` finished runs OR finished less than ``keep_days`` days ago; every other
finished run is deleted together with its input ids, calls, checkpoints, decisions,
retry grants and events, and then every blob those runs reached that nothing left
reaches. A chat left without any run is deleted too (with its plan, conflicts and chat
events): it is gone. Active and held (needs_attention) runs are never touched.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durability.errors import InvalidArgument
from durability.records import TERMINAL_RUN_STATUSES
from durability.store import sqlite_files, sqlite_scans

DEFAULT_RETENTION_RUNS = 100
DEFAULT_RETENTION_DAYS = 30
SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class FinishedRun:
    id: str
    finished_at: float  # the run's updated_at: its last state change was the ending


@dataclass
class RetentionReport:
    keep_runs: int
    keep_days: float
    dry_run: bool
    run_ids: list[str] = field(default_factory=list)  # runs selected for deletion
    runs_removed: int = 0
    blobs_removed: int = 0
    chats_removed: int = 0  # chats left without any run: gone, with their plan

    def to_dict(self) -> dict[str, Any]:
        return {
            "keep_runs": self.keep_runs,
            "keep_days": self.keep_days,
            "dry_run": self.dry_run,
            "run_ids": list(self.run_ids),
            "runs_removed": self.runs_removed,
            "blobs_removed": self.blobs_removed,
            "chats_removed": self.chats_removed,
        }


def validate_limits(keep_runs: object, keep_days: object) -> tuple[int, float]:
    if not isinstance(keep_runs, int) or isinstance(keep_runs, bool) or keep_runs < 0:
        raise InvalidArgument("retention_runs must be an integer >= 0", field="retention_runs")
    if (
        not isinstance(keep_days, int | float)
        or isinstance(keep_days, bool)
        or not keep_days >= 0
        or keep_days == float("inf")
    ):
        raise InvalidArgument("retention_days must be a number >= 0", field="retention_days")
    return keep_runs, float(keep_days)


def expired_runs(
    finished: Iterable[FinishedRun], keep_runs: int, keep_days: float, now: float
) -> list[str]:
    """Ids of the finished runs past both limits, oldest first."""
    keep_runs, keep_days = validate_limits(keep_runs, keep_days)
    newest_first = sorted(finished, key=lambda r: (r.finished_at, r.id), reverse=True)
    cutoff = now - keep_days * SECONDS_PER_DAY
    expired = [r for r in newest_first[keep_runs:] if r.finished_at < cutoff]
    return [r.id for r in reversed(expired)]


def finished_runs(conn: sqlite3.Connection) -> list[FinishedRun]:
    rows = sqlite_scans.runs_with_status(conn, TERMINAL_RUN_STATUSES)
    return [FinishedRun(run_id, finished_at) for run_id, finished_at in rows]


def apply_retention(
    db_path: Path,
    *,
    keep_runs: int = DEFAULT_RETENTION_RUNS,
    keep_days: float = DEFAULT_RETENTION_DAYS,
    now: float | None = None,
    dry_run: bool = False,
) -> RetentionReport:
    """Delete expired finished runs and orphaned blobs from the SQLite journal at `db_path`.

    Safe while the agent runs: selection and deletion happen in one write transaction.
    """
    keep_runs, keep_days = validate_limits(keep_runs, keep_days)
    moment = time.time() if now is None else now
    report = RetentionReport(keep_runs=keep_runs, keep_days=keep_days, dry_run=dry_run)
    conn = sqlite_files.connect_readwrite(Path(db_path))
    try:
        if dry_run:
            report.run_ids = expired_runs(finished_runs(conn), keep_runs, keep_days, moment)
            return report
        with sqlite_files.write_transaction(conn):
            report.run_ids = expired_runs(finished_runs(conn), keep_runs, keep_days, moment)
            chats = sqlite_scans.contexts_of_runs(conn, report.run_ids)
            report.runs_removed, report.blobs_removed = sqlite_scans.delete_runs_and_orphan_blobs(
                conn, report.run_ids
            )
            report.chats_removed = sqlite_scans.delete_emptied_contexts(conn, chats)
    finally:
        conn.close()
    return report
