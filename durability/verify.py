"""Verify a journal file: SQLite's own integrity check, then every digest the journal keeps:
checkpoints and their history chains, blobs, calls (arguments against the fingerprint,
results against their digest), events and documents. Nothing is written or repaired."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durability import integrity
from durability.store import sqlite_files, sqlite_scans
from durability.store.sqlite import migrations
from durability.store.sqlite_tx import SqliteTx

REQUIRED_TABLES = ("runs", "calls", "checkpoints", "blobs", "inputs", "events", "decisions")


_REASONS = {
    "digest_mismatch": "the body no longer matches its recorded digest",
    "undecodable": "the body is not valid checkpoint JSON",
    "unknown_format": "the body has an unknown format version",
    "blob_missing": "a history blob it names is missing",
    "blob_digest_mismatch": "a history blob no longer matches its hash",
    "undecodable_history_node": "a history node is not valid JSON",
    "history_length_mismatch": "a history resolves to the wrong number of messages",
    "history_chain_too_long": "a history chain does not end",
}


@dataclass(frozen=True)
class Problem:
    code: str  # stable: not_found, not_sqlite, unreadable, integrity, foreign_key, checkpoint,
    # blob, call_args, call_result, event, document, ...
    message: str
    where: str = ""  # e.g. "checkpoint 12 (run r-1)"
    ids: dict[str, Any] = field(default_factory=dict)  # the damaged record's ids

    def describe(self) -> str:
        return f"{self.code}: {self.where + ': ' if self.where else ''}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "where": self.where, "ids": self.ids}


@dataclass
class VerifyReport:
    path: Path
    problems: list[Problem] = field(default_factory=list)
    checkpoints_checked: int = 0
    checked: dict[str, int] = field(default_factory=dict)  # records checked, per kind
    notes: list[str] = field(default_factory=list)  # checks that could not run (old schema)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "ok": self.ok,
            "checkpoints_checked": self.checkpoints_checked,
            "checked": dict(self.checked),
            "notes": list(self.notes),
            "problems": [p.to_dict() for p in self.problems],
        }


def verify_database(path: Path) -> VerifyReport:
    """Check everything and report every problem found (never raises for a bad file)."""
    path = Path(path)
    report = VerifyReport(path=path)
    if not path.is_file():
        report.problems.append(Problem("not_found", f"no journal file at {path}"))
        return report
    if not sqlite_files.has_sqlite_header(path):
        report.problems.append(
            Problem("not_sqlite", "the file does not start with the SQLite header")
        )
        return report
    try:
        with sqlite_files.readonly(path) as conn:
            _check(conn, report)
    except sqlite3.DatabaseError as exc:
        report.problems.append(Problem("unreadable", f"SQLite cannot read the file: {exc}"))
    return report


def _check(conn: sqlite3.Connection, report: VerifyReport) -> None:
    for line in sqlite_files.integrity_problems(conn):
        report.problems.append(Problem("integrity", line))
    for line in sqlite_files.foreign_key_problems(conn):
        report.problems.append(Problem("foreign_key", line))
    schema = sqlite_files.schema_version(conn)
    newest = max((number for number, _ in migrations()), default=0)
    if schema > newest:
        report.problems.append(
            Problem("schema_too_new", f"schema version {schema}; this program knows {newest}")
        )
    missing = [t for t in REQUIRED_TABLES if t not in sqlite_files.table_names(conn)]
    if missing:
        report.problems.append(
            Problem("not_a_journal", f"missing journal tables: {', '.join(missing)}")
        )
        return
    checked, damaged = sqlite_scans.checkpoint_problems(conn)
    report.checkpoints_checked = report.checked["checkpoints"] = checked
    for cp in damaged:
        report.problems.append(
            Problem(
                "checkpoint",
                f"{cp.reason} ({_REASONS.get(cp.reason, 'damaged')})",
                where=f"checkpoint {cp.checkpoint_id} (run {cp.run_id})",
                ids={"checkpoint_id": cp.checkpoint_id, "run_id": cp.run_id},
            )
        )
    blobs, bad_blobs = sqlite_scans.blob_problems(conn)
    report.checked["blobs"] = blobs
    for blob_hash in bad_blobs:
        report.problems.append(
            Problem(
                "blob",
                "stored bytes no longer match their hash",
                where=f"blob {blob_hash}",
                ids={"blob_hash": blob_hash},
            )
        )
    _check_records(conn, report)


_RECORD_REASONS = {
    "digest_mismatch": "the stored value no longer matches its digest",
    "undecodable": "the stored value is not valid JSON",
    "blob_missing": "the blob holding the value is missing",
    "digest_missing": "the digest recorded with the value is missing",
    "not_an_object": "the stored value is not an object",
}


def _check_records(conn: sqlite3.Connection, report: VerifyReport) -> None:
    """Calls, events, documents and tasks through the journal's checks (durability/integrity)."""
    has_event_digests = "digest" in sqlite_files.column_names(conn, "events")
    if not has_event_digests:
        report.notes.append(
            "events carry no digests before schema 5: start the server once to upgrade"
        )
    has_tasks = "scheduled_tasks" in sqlite_files.table_names(conn)
    if not has_tasks:
        report.notes.append("no scheduled tasks before schema 6: start the server once to upgrade")
    records = integrity.verify_records(
        SqliteTx(conn), checkpoints=False, events=has_event_digests, tasks=has_tasks
    )
    report.checked.update(records.checked)
    for damage in records.damages:
        where = damage.describe().rsplit(": ", 1)[0]
        message = f"{damage.reason} ({_RECORD_REASONS.get(damage.reason, 'damaged')})"
        report.problems.append(Problem(damage.record, message, where=where, ids=damage.ids))
