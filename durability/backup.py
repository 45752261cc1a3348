"""Private backups through SQLite's backup API, and restore from a verified backup."""

from __future__ import annotations

import os
import sqlite3
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from durability.errors import DurabilityError
from durability.store import sqlite_files
from durability.verify import verify_database

BACKUP_DIR_NAME = "backups"


class JournalNotFound(DurabilityError):
    code = "journal_not_found"


class BackupInvalid(DurabilityError):
    code = "backup_invalid"


class JournalInUse(DurabilityError):
    code = "journal_in_use"


class BackupFailed(DurabilityError):
    code = "backup_failed"


@dataclass(frozen=True)
class RestoreResult:
    restored: Path
    replaced: Path | None  # where the previous journal was kept (.bak), if there was one


def default_backup_dir(db_path: Path) -> Path:
    return Path(db_path).parent / BACKUP_DIR_NAME


def backup_file_name(now: datetime | None = None) -> str:
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"journal-{moment.strftime('%Y%m%dT%H%M%S')}Z.sqlite"


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) and make it 0700."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def create_backup(db_path: Path, dest_dir: Path | None = None) -> Path:
    """Write a consistent copy of the journal into a private folder; return its path.

    The folder is 0700 and the file 0600. The copy is integrity-checked before it counts.
    """
    db_path = Path(db_path)
    _require_journal(db_path)
    folder = private_dir(dest_dir or default_backup_dir(db_path))
    dest = _free_name(folder / backup_file_name())
    try:
        sqlite_files.online_backup(db_path, dest)
    except sqlite3.DatabaseError as exc:
        raise BackupFailed(f"backup of {db_path} failed: {exc}", path=str(db_path)) from None
    report = verify_database(dest)
    if not report.ok:
        dest.unlink(missing_ok=True)
        raise BackupFailed(
            f"the backup copy failed verification: {report.problems[0].message}",
            path=str(db_path),
        )
    return dest


def restore_backup(backup: Path, db_path: Path) -> RestoreResult:
    """Replace the journal at `db_path` with a verified copy of `backup`.

    The agent must not be running. The replaced journal is kept next to it as `.bak`.
    """
    backup, db_path = Path(backup), Path(db_path)
    if not backup.is_file():
        raise BackupInvalid(f"backup file not found: {backup}", path=str(backup))
    report = verify_database(backup)
    if not report.ok:
        names = "; ".join(p.describe() for p in report.problems[:5])
        raise BackupInvalid(f"backup {backup} failed verification: {names}", path=str(backup))
    private_dir(db_path.parent)
    if db_path.exists():
        _fold_wal_or_refuse(db_path)
    staged = db_path.with_name(db_path.name + ".restoring")
    for leftover in [staged, *sqlite_files.sidecars(staged)]:
        leftover.unlink(missing_ok=True)
    try:
        sqlite_files.online_backup(backup, staged)
        replaced = None
        if db_path.exists():
            replaced = _free_name(db_path.with_name(db_path.name + ".bak"))
            os.replace(db_path, replaced)
            # WAL/SHM files of the old journal go with it: left here, SQLite would replay
            # the old file's frames onto the restored one.
            for side, suffix in zip(
                sqlite_files.sidecars(db_path), ("-wal", "-shm", "-journal"), strict=True
            ):
                if side.exists():
                    os.replace(side, Path(str(replaced) + suffix))
        os.replace(staged, db_path)
    finally:
        staged.unlink(missing_ok=True)
    os.chmod(db_path, 0o600)
    sqlite_files.fsync_dir(db_path.parent)
    return RestoreResult(restored=db_path, replaced=replaced)


def is_private_file(path: Path) -> bool:
    return stat.S_IMODE(Path(path).stat().st_mode) & 0o077 == 0


def _require_journal(db_path: Path) -> None:
    if not db_path.is_file():
        raise JournalNotFound(f"no journal at {db_path}", path=str(db_path))


def _fold_wal_or_refuse(db_path: Path) -> None:
    """Fold the WAL into the file; a WAL that survives our close means another process has it."""
    try:
        sqlite_files.checkpoint_wal(db_path)
    except sqlite3.DatabaseError:
        return  # a corrupt current journal is exactly what a restore replaces
    wal = Path(str(db_path) + "-wal")
    if wal.exists():
        raise JournalInUse(
            f"the journal {db_path} is open in another process; stop the agent first",
            path=str(db_path),
        )
    for side in sqlite_files.sidecars(db_path):
        side.unlink(missing_ok=True)


def _free_name(path: Path) -> Path:
    """`path`, or the same name with -2, -3, ... before the suffix when it is taken."""
    if not path.exists():
        return path
    n = 2
    while True:
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not candidate.exists():
            return candidate
        n += 1
