"""Backups through SQLite's backup API (private files) and restore from a verified backup."""

from __future__ import annotations

import re
import stat
import threading
from pathlib import Path

import pytest

from durability import Journal
from durability.backup import (
    BackupInvalid,
    JournalInUse,
    JournalNotFound,
    create_backup,
    restore_backup,
)
from durability.verify import verify_database
from tests.durability._ops_support import count, execute, journaled_run

pytestmark = pytest.mark.unit


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "durability" / "journal.sqlite"
    with Journal.open_sqlite(path) as journal:
        journaled_run(journal, "chat-1", "in-1")
        journaled_run(journal, "chat-2", "in-2", status=None)  # still active
    return path


def test_backup_is_a_private_complete_copy(db: Path) -> None:
    backup = create_backup(db)
    assert backup.parent == db.parent / "backups"
    assert re.fullmatch(r"journal-\d{8}T\d{6}Z\.sqlite", backup.name)
    assert _mode(backup.parent) == 0o700
    assert _mode(backup) == 0o600
    assert verify_database(backup).ok
    assert count(backup, "runs") == 2
    assert count(backup, "checkpoints") == count(db, "checkpoints") == 6
    assert not Path(str(backup) + "-wal").exists()


def test_two_backups_in_one_second_do_not_collide(db: Path, tmp_path: Path) -> None:
    dest = tmp_path / "elsewhere" / "b"
    first, second = create_backup(db, dest), create_backup(db, dest)
    assert first != second
    assert first.parent == second.parent == dest
    assert _mode(dest) == 0o700


def test_backup_while_the_journal_is_written(db: Path) -> None:
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with Journal.open_sqlite(db) as journal:
                n = 0
                while not stop.is_set():
                    journaled_run(journal, f"busy-{n}", f"busy-in-{n}", steps=2)
                    n += 1
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        backups = [create_backup(db) for _ in range(3)]
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not errors
    for backup in backups:
        assert verify_database(backup).ok


def test_backup_of_a_missing_journal_is_refused(tmp_path: Path) -> None:
    with pytest.raises(JournalNotFound) as info:
        create_backup(tmp_path / "none" / "journal.sqlite")
    assert info.value.code == "journal_not_found"


def test_restore_replaces_the_journal_and_keeps_the_old_one(db: Path) -> None:
    backup = create_backup(db)
    with Journal.open_sqlite(db) as journal:
        journaled_run(journal, "chat-3", "in-3")
    assert count(db, "runs") == 3
    result = restore_backup(backup, db)
    assert result.replaced == db.with_name("journal.sqlite.bak")
    assert count(result.replaced, "runs") == 3
    assert count(db, "runs") == 2
    assert _mode(db) == 0o600
    assert verify_database(db).ok
    with Journal.open_sqlite(db) as journal:  # the engine opens and writes the restored file
        journaled_run(journal, "chat-4", "in-4")
        assert len(journal.list_runs()) == 3
    second = restore_backup(backup, db)
    assert second.replaced == db.with_name("journal.sqlite-2.bak")


def test_restore_into_an_empty_place(db: Path, tmp_path: Path) -> None:
    backup = create_backup(db)
    target = tmp_path / "fresh" / "journal.sqlite"
    result = restore_backup(backup, target)
    assert result.replaced is None
    assert count(target, "runs") == 2


def test_restore_refuses_a_damaged_backup(db: Path) -> None:
    backup = create_backup(db)
    execute(backup, "UPDATE checkpoints SET body = body || ' ' WHERE id = 2")
    before = db.read_bytes()
    with pytest.raises(BackupInvalid) as info:
        restore_backup(backup, db)
    assert info.value.code == "backup_invalid"
    assert "checkpoint 2" in info.value.message
    assert db.read_bytes() == before
    assert not db.with_name("journal.sqlite.bak").exists()


def test_restore_refuses_a_missing_or_foreign_file(db: Path, tmp_path: Path) -> None:
    with pytest.raises(BackupInvalid):
        restore_backup(tmp_path / "nope.sqlite", db)
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database")
    with pytest.raises(BackupInvalid) as info:
        restore_backup(foreign, db)
    assert "not_sqlite" in info.value.message


def test_restore_refuses_while_the_journal_is_open(db: Path) -> None:
    backup = create_backup(db)
    journal = Journal.open_sqlite(db)
    try:
        with pytest.raises(JournalInUse):
            restore_backup(backup, db)
    finally:
        journal.close()
    assert count(db, "runs") == 2
    assert sorted(p.name for p in db.parent.iterdir()) == ["backups", "journal.sqlite"]


def test_restore_over_a_damaged_journal_moves_its_wal_away(db: Path) -> None:
    backup = create_backup(db)
    leftover_wal = b"\x37\x7f\x06\x82" + b"not a usable wal" * 500
    db.write_bytes(b"garbage" * 5000)  # a damaged journal whose WAL SQLite cannot fold in
    Path(str(db) + "-wal").write_bytes(leftover_wal)
    result = restore_backup(backup, db)
    assert result.replaced is not None
    assert Path(str(result.replaced) + "-wal").read_bytes() == leftover_wal
    assert not Path(str(db) + "-wal").exists()
    assert verify_database(db).ok
    with Journal.open_sqlite(db) as journal:
        assert {r.context_id for r in journal.list_runs()} == {"chat-1", "chat-2"}
