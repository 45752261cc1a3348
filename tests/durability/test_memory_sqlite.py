"""SQLite's vector search: sqlite-vec loaded into every connection of the journal, and a
clear error (not a broken journal) when it is missing or cannot be loaded."""

from __future__ import annotations

import sqlite3
import sys
import types

import pytest

from durability.errors import MemoryBackendUnavailable
from durability.journal import Journal
from durability.memory import Memories
from tests.support.model_server import scripted_vector

pytestmark = pytest.mark.unit

MODEL = "test/embedder"


def _check_unavailable(path, expected: str) -> None:
    journal = Journal.open_sqlite(path)
    try:
        memories = Memories(journal)
        assert memories.search_backend == "unavailable"
        assert expected in memories.search_problem
        saved = memories.save("default", "main", "still saved", {}, [1.0, 2.0], model=MODEL)
        with pytest.raises(MemoryBackendUnavailable) as info:
            memories.search("default", [1.0, 2.0], model=MODEL)
        assert expected in info.value.message
        assert info.value.to_dict()["code"] == "memory_backend_unavailable"
        assert [m.id for m in memories.list_memories("default")] == [saved]  # the journal works
    finally:
        journal.close()


def test_a_missing_package_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)
    _check_unavailable(tmp_path / "j.sqlite", "sqlite-vec package is not installed")


def test_an_unloadable_extension_is_a_clear_error(tmp_path, monkeypatch):
    broken = types.ModuleType("sqlite_vec")

    def load(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("vec0.so: cannot open shared object file")

    broken.load = load  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sqlite_vec", broken)
    _check_unavailable(tmp_path / "j.sqlite", "cannot open shared object file")


def test_every_connection_of_the_journal_has_the_functions(tmp_path):
    journal = Journal.open_sqlite(tmp_path / "j.sqlite")
    try:
        version = journal.store.read(lambda tx: tx.sql.scalar("SELECT vec_version()"))
        in_writer = journal.store.write(lambda tx: tx.sql.scalar("SELECT vec_version()"))
        assert version == in_writer and str(version).startswith("v")
        memories = Memories(journal)
        memories.save("default", "main", "a b", {}, scripted_vector("a b"), model=MODEL)
        assert memories.forget("default", scripted_vector("a b"), model=MODEL) == 1
    finally:
        journal.close()
    # the schema needs no extension: a plain sqlite3 connection reads the tables
    plain = sqlite3.connect(tmp_path / "j.sqlite")
    try:
        assert plain.execute("SELECT COUNT(*) FROM memories").fetchone() == (0,)
    finally:
        plain.close()
