"""The SQLite file: pragmas, private file modes, quick check and migrations on open."""

from __future__ import annotations

import sqlite3
import stat

import pytest

from durability import CorruptDatabase, Journal, SchemaTooNew
from durability.store.sqlite import migrations
from tests.durability.conftest import sha
from tests.support.damaged_journal import damage_journal

pytestmark = pytest.mark.unit


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "usr" / "durability" / "journal.sqlite"


def test_pragmas_on_every_connection(path):
    with Journal.open_sqlite(path) as journal:
        store = journal.store
        for conn_pragma in (
            lambda sql: store._writer_conn.execute(sql).fetchone()[0],
            lambda sql: store.read_raw(lambda c: c.execute(sql).fetchone()[0]),
        ):
            assert conn_pragma("PRAGMA journal_mode") == "wal"
            assert conn_pragma("PRAGMA synchronous") == 2  # FULL
            assert conn_pragma("PRAGMA secure_delete") == 1
            assert conn_pragma("PRAGMA foreign_keys") == 1
            assert conn_pragma("PRAGMA busy_timeout") >= 1000
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent
        assert conn.execute("PRAGMA user_version").fetchone()[0] == migrations()[-1][0]
    finally:
        conn.close()


def test_files_are_private(path):
    with Journal.open_sqlite(path) as journal:
        journal.admit("chat", "in-1", sha("x"))
        assert mode(path.parent) == 0o700
        assert mode(path) == 0o600
        for suffix in ("-wal", "-shm"):
            side = path.with_name(path.name + suffix)
            assert side.exists()
            assert mode(side) == 0o600, suffix


def test_reopening_keeps_data_and_schema_version(path):
    with Journal.open_sqlite(path) as journal:
        run = journal.admit("chat", "in-1", sha("x")).run
        version = journal.store.schema_version
    with Journal.open_sqlite(path) as journal:
        assert journal.get_run(run.id) == run
        assert journal.store.schema_version == version == len(migrations())


def test_migrations_are_numbered_files():
    numbers = [n for n, _ in migrations()]
    assert numbers == list(range(1, len(numbers) + 1))


def test_a_newer_schema_is_refused(path):
    Journal.open_sqlite(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=999")
    conn.close()
    with pytest.raises(SchemaTooNew) as info:
        Journal.open_sqlite(path)
    assert info.value.code == "schema_too_new"


def test_a_file_that_is_not_a_database_is_refused(path):
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not sqlite" * 500)
    with pytest.raises(CorruptDatabase) as info:
        Journal.open_sqlite(path)
    assert info.value.code == "corrupt_database"


def test_a_damaged_page_fails_the_quick_check(path):
    with Journal.open_sqlite(path) as journal:
        for i in range(300):
            journal.append_event("chat", "log", {"i": i, "text": "x" * 200})
    size = path.stat().st_size
    data = bytearray(path.read_bytes())
    page = 4096
    assert size > 8 * page
    for offset in range(3 * page, 6 * page, 7):
        data[offset] = 0xA5
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptDatabase):
        Journal.open_sqlite(path)


def test_integrity_check_on_demand(path):
    with Journal.open_sqlite(path) as journal:
        assert journal.integrity_check() == []
        assert journal.integrity_check(full=True) == []


def test_a_new_journal_has_small_pages_and_a_wal_of_4_mib(path):
    """Issue #24: 1 KiB pages (a turn's WAL bytes), autocheckpoint at 4 MiB of pages."""
    with Journal.open_sqlite(path) as journal:
        writer = journal.store._writer_conn
        assert writer.execute("PRAGMA page_size").fetchone()[0] == 1024
        assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 4096


def test_an_existing_journal_keeps_its_page_size(path):
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size=4096")
    conn.execute("CREATE TABLE old_data (x)")  # the file exists with 4 KiB pages
    conn.close()
    with Journal.open_sqlite(path) as journal:
        writer = journal.store._writer_conn
        assert writer.execute("PRAGMA page_size").fetchone()[0] == 4096
        assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1024


# The check begun at process start (durability/store/sqlite_check.py, issue #24) -------------------
def _counting_checks(monkeypatch) -> list[bool]:
    from durability.store.sqlite import SqliteStore

    calls: list[bool] = []
    original = SqliteStore._check

    def check(conn, full):
        calls.append(full)
        return original(conn, full)

    monkeypatch.setattr(SqliteStore, "_check", staticmethod(check))
    return calls


def test_a_check_begun_early_that_passed_stands_for_the_stores_own(path, monkeypatch):
    from durability.store import sqlite_check

    Journal.open_sqlite(path).close()
    calls = _counting_checks(monkeypatch)
    check = sqlite_check.begin(path)
    assert check is not None
    with Journal.open_sqlite(path) as journal:
        assert calls == [], "the file was checked twice"
        assert journal.integrity_check() == []
    with Journal.open_sqlite(path):  # each early verdict answers once
        assert calls == [False, False]


def test_a_damaged_journal_is_refused_as_before_when_its_check_was_begun_early(path, monkeypatch):
    from durability.store import sqlite_check

    damage_journal(path)
    calls = _counting_checks(monkeypatch)
    with pytest.raises(CorruptDatabase) as before:  # no early check: as always
        Journal.open_sqlite(path)
    checked_before = list(calls)
    calls.clear()
    check = sqlite_check.begin(path)
    assert check is not None
    with pytest.raises(CorruptDatabase) as after:
        Journal.open_sqlite(path)
    assert check.done.wait(60) and check.rows != ["ok"]  # the early check saw it too
    assert after.value.to_dict() == before.value.to_dict()  # code, message, problems
    assert after.value.code == "corrupt_database"
    assert calls == checked_before, "the store checks the file itself after a failed check"


def test_a_file_that_is_not_a_database_is_refused_as_before_after_an_early_check(path):
    from durability.store import sqlite_check

    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not sqlite" * 500)
    assert sqlite_check.begin(path) is not None
    with pytest.raises(CorruptDatabase) as info:
        Journal.open_sqlite(path)
    assert info.value.code == "corrupt_database"


def test_the_store_waits_for_the_early_verdict_before_it_opens(path, monkeypatch):
    """Nothing is served before the verdict: the open returns only once it is known."""
    import threading

    from durability.store import sqlite_check
    from tests.integration._helpers import wait_until

    Journal.open_sqlite(path).close()
    check = sqlite_check.begin(path)
    assert check is not None
    asked, release = threading.Event(), threading.Event()
    real_passed = check.passed

    def held_passed() -> bool:
        asked.set()
        release.wait(60)
        return real_passed()

    monkeypatch.setattr(check, "passed", held_passed)
    opened: list[Journal] = []
    opener = threading.Thread(target=lambda: opened.append(Journal.open_sqlite(path)))
    opener.start()
    wait_until(asked.is_set, timeout=30, what="the store to ask for the verdict")
    assert opened == [], "the journal opened before its verdict"
    release.set()
    opener.join(30)
    assert len(opened) == 1
    opened[0].close()


def test_no_early_check_for_a_journal_not_made_yet(path):
    from durability.store import sqlite_check

    assert sqlite_check.begin(path) is None
    assert not path.exists()
