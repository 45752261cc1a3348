"""verify: SQLite's integrity check plus every checkpoint digest, every problem reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durability import Journal
from durability.verify import verify_database
from tests.durability._ops_support import execute, journaled_run

pytestmark = pytest.mark.unit


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "durability" / "journal.sqlite"
    with Journal.open_sqlite(path) as journal:
        history: list[dict] = []
        for n in range(3):
            _, history = journaled_run(journal, "chat-1", f"in-{n}", history=history)
    return path


def test_sound_journal_has_no_problems(db: Path) -> None:
    report = verify_database(db)
    assert report.ok, report.problems
    assert report.checkpoints_checked == 9


def test_changed_checkpoint_body_is_named(db: Path) -> None:
    execute(
        db, "UPDATE checkpoints SET body = replace(body, '\"step\":1', '\"step\":7') WHERE id = 5"
    )
    execute(db, "UPDATE checkpoints SET body = 'not json' , digest = ? WHERE id = 8", ("0" * 64,))
    report = verify_database(db)
    where = {p.where: p.message for p in report.problems}
    assert [p.code for p in report.problems] == ["checkpoint", "checkpoint"]
    assert any(w.startswith("checkpoint 5 ") for w in where)
    assert "digest_mismatch" in where[next(w for w in where if w.startswith("checkpoint 5 "))]
    assert any(w.startswith("checkpoint 8 ") for w in where)


def test_damaged_history_blob_is_named(db: Path) -> None:
    execute(
        db,
        "UPDATE blobs SET data = ? WHERE hash = (SELECT min(hash) FROM blobs)",
        (json.dumps({"role": "user", "content": "forged"}).encode(),),
    )
    report = verify_database(db)
    codes = {p.code for p in report.problems}
    assert "blob" in codes
    assert "checkpoint" in codes


def test_missing_history_blob_is_named(db: Path) -> None:
    execute(db, "DELETE FROM blobs WHERE hash = (SELECT min(hash) FROM blobs)")
    messages = [p.message for p in verify_database(db).problems]
    assert messages and all("blob_missing" in m for m in messages)


def test_missing_and_foreign_files(tmp_path: Path) -> None:
    assert [p.code for p in verify_database(tmp_path / "absent.sqlite").problems] == ["not_found"]
    text = tmp_path / "text.sqlite"
    text.write_text("hello, not a database\n" * 100)
    assert [p.code for p in verify_database(text).problems] == ["not_sqlite"]


def test_truncated_file_is_reported(db: Path) -> None:
    _fold_wal(db)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    report = verify_database(db)
    assert not report.ok
    assert report.problems[0].code in {"integrity", "unreadable"}


def test_garbled_pages_are_reported(db: Path) -> None:
    _fold_wal(db)
    data = bytearray(db.read_bytes())
    page = 4096
    for offset in range(page, len(data), page):  # keep the header page, garble every other
        data[offset + 8 : offset + 200] = b"\xa5" * 192
    db.write_bytes(bytes(data))
    report = verify_database(db)
    assert not report.ok
    assert {p.code for p in report.problems} & {"integrity", "unreadable"}


def _fold_wal(db: Path) -> None:
    execute(db, "PRAGMA wal_checkpoint(TRUNCATE)")
    execute(db, "PRAGMA journal_mode=DELETE")


def test_newer_schema_is_named(db: Path) -> None:
    execute(db, "PRAGMA user_version = 999")
    assert [p.code for p in verify_database(db).problems] == ["schema_too_new"]


def test_a_schema_4_file_is_verified_without_event_digests(tmp_path: Path) -> None:
    import sqlite3

    from durability.store.sqlite import migrations

    path = tmp_path / "journal.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for number, script in migrations():
        if number <= 4:
            conn.executescript(f"BEGIN;\n{script.read_text(encoding='utf-8')}\nCOMMIT;")
    conn.execute("PRAGMA user_version=4")
    conn.close()
    report = verify_database(path)
    assert report.ok, report.problems
    assert "events" not in report.checked
    assert report.notes and "schema 5" in report.notes[0]


def test_a_damaged_scheduled_task_is_named(db: Path) -> None:
    with Journal.open_sqlite(db) as journal:
        journal.create_task("t-1", {"name": "n", "prompt": "p"}, actor="user", done_until=1.0)
    assert verify_database(db).checked["tasks"] == 1
    execute(db, "UPDATE scheduled_tasks SET body = '{\"name\": \"forged\"}' WHERE id = 't-1'")
    [problem] = verify_database(db).problems
    assert problem.code == "task" and problem.ids == {"task_id": "t-1", "revision": 1}
    assert problem.where == "task of scheduled task t-1 (revision 1)"
    assert "no longer matches its digest" in problem.message


def _rewrite_body(db: Path, checkpoint_id: int, change) -> None:
    import sqlite3

    from durability import canonical_json
    from durability.canonical import digest_text

    conn = sqlite3.connect(db)
    body = json.loads(
        conn.execute("SELECT body FROM checkpoints WHERE id = ?", (checkpoint_id,)).fetchone()[0]
    )
    conn.close()
    change(body)
    text = canonical_json(body)
    execute(
        db,
        "UPDATE checkpoints SET body = ?, digest = ? WHERE id = ?",
        (text, digest_text(text), checkpoint_id),
    )


def test_both_checkpoint_formats_are_checked(tmp_path: Path) -> None:
    """Issue #24 round 3: format 2 entries (inline, ``of``) and format 1 ones (written by the
    old code) in one file; a sound file passes, each kind of damage is named."""
    from durability.records import CheckpointData
    from tests.durability._ops_support import old_format_checkpoint, sha

    path = tmp_path / "journal.sqlite"
    log = [{"m": i} for i in range(4)]
    with Journal.open_sqlite(path) as journal:
        old = journal.admit("chat", "in-1", sha("1")).run
        old_format_checkpoint(journal, old, {"log": log[:2]}, {})
        journal.set_run_status(old.id, "completed")
        run = journal.admit("chat", "in-2", sha("2")).run
        ref = journal.write_checkpoint(
            run.id, CheckpointData({}, {"log": log, "resume:log": log[:3]})
        )
    assert verify_database(path).ok, verify_database(path).problems

    def too_long(body):
        body["histories"]["resume:log"] = {"of": "log", "keep": 9}

    _rewrite_body(path, ref.id, too_long)
    assert ["history_length_mismatch" in p.message for p in verify_database(path).problems] == [
        True
    ]

    def bad_add(body):
        body["histories"]["log"]["add"] = [1]

    _rewrite_body(path, ref.id, bad_add)
    assert ["undecodable" in p.message for p in verify_database(path).problems] == [True]
