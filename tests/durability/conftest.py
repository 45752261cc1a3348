"""Journal fixtures. ``backend`` here is SQLite (the engine's SQLite-specific tests use it);
tests/durability/conformance/conftest.py parametrises it over ALL_BACKENDS.

A backend entry knows how to open a journal in a test's temporary space and how to damage
stored bytes directly (the conformance suite's checks for corrupt checkpoints need that).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from durability import Journal, Masker

BACKENDS = ["sqlite"]
#: Every engine: the conformance suite runs whole on each (postgres needs a server).
ALL_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@dataclass
class Backend:
    name: str
    open: Callable[..., Journal]
    #: Overwrite stored bytes behind the journal's back (for corruption checks).
    corrupt_checkpoint: Callable[[int, str], None]
    corrupt_blob: Callable[[str, bytes], None]
    #: overwrite(table, column, value, key_column, key): one stored column, raw.
    overwrite: Callable[[str, str, object, str, object], None] | None = None


def _sqlite_backend(tmp_path: Path) -> Backend:
    path = tmp_path / "durability" / "journal.sqlite"

    def open_journal(masker: Masker | None = None, **kwargs) -> Journal:
        return Journal.open_sqlite(path, masker=masker, **kwargs)

    def execute_raw(sql: str, args: tuple = ()) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute(sql, args)
        finally:
            conn.close()

    backend = Backend(
        "sqlite",
        open_journal,
        lambda cid, body: execute_raw("UPDATE checkpoints SET body = ? WHERE id = ?", (body, cid)),
        lambda h, data: execute_raw("UPDATE blobs SET data = ? WHERE hash = ?", (data, h)),
        lambda table, column, value, key_column, key: execute_raw(
            f"UPDATE {table} SET {column} = ? WHERE {key_column} = ?", (value, key)
        ),
    )
    backend.path = path  # type: ignore[attr-defined]
    return backend


def _postgres_backend(request: pytest.FixtureRequest) -> Backend:
    """A schema of the test's own on the session's PostgreSQL server."""
    server = request.getfixturevalue("postgres_server")
    namespace = request.getfixturevalue("pg_namespace")

    def open_journal(masker: Masker | None = None, **kwargs) -> Journal:
        return Journal.open_postgres(
            server.dsn, namespace=namespace, masker=masker, pool_size=4, **kwargs
        )

    def execute_raw(sql: str, args: tuple = ()) -> None:
        from psycopg import sql as pgsql

        with server.connect() as conn:
            conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(namespace)))
            conn.execute(sql, args)

    backend = Backend(
        "postgres",
        open_journal,
        lambda cid, body: execute_raw(
            "UPDATE checkpoints SET body = %s WHERE id = %s", (body, cid)
        ),
        lambda h, data: execute_raw("UPDATE blobs SET data = %s WHERE hash = %s", (data, h)),
        lambda table, column, value, key_column, key: execute_raw(
            f"UPDATE {table} SET {column} = %s WHERE {key_column} = %s", (value, key)
        ),
    )
    backend.namespace = namespace  # type: ignore[attr-defined]
    return backend


def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return _sqlite_backend(tmp_path)
    if request.param == "postgres":
        return _postgres_backend(request)
    raise AssertionError(f"unknown backend {request.param}")  # a missing backend fails


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request, tmp_path)


@pytest.fixture
def journal(backend: Backend) -> Iterator[Journal]:
    opened = backend.open()
    try:
        yield opened
    finally:
        opened.close()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
