"""The SQLite file: pragmas, private file modes, quick check and migrations on open."""

from __future__ import annotations

import sqlite3
import stat

import pytest

from durability import CorruptDatabase, Journal, SchemaTooNew
from durability.store.sqlite import migrations
from tests.durability.conftest import sha

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
