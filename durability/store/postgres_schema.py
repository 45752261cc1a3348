"""The PostgreSQL journal's schema: its namespace's name, its migrations, and applying them
once when several workers start together (an advisory lock held for the transaction)."""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from durability.errors import InvalidArgument
from durability.store.base import numbered_migrations, pending_migrations

MIGRATIONS_DIR = Path(__file__).parent / "migrations" / "postgres"
NAMESPACE_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def migrations() -> list[tuple[int, Path]]:
    """Numbered migration files of this engine, in order."""
    return numbered_migrations(MIGRATIONS_DIR)


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not NAMESPACE_PATTERN.match(namespace):
        raise InvalidArgument(
            "the namespace must be a lowercase SQL name (letters, digits, _; at most 63)",
            field="namespace",
        )
    if namespace.startswith("pg_"):
        raise InvalidArgument("a namespace may not start with pg_", field="namespace")
    return namespace


def migrate(conn: psycopg.Connection[Any], namespace: str) -> None:
    """Create the namespace and apply the migrations it lacks, in one transaction."""
    lock_key = int.from_bytes(
        hashlib.sha256(f"a0-migrate:{namespace}".encode()).digest()[:8], "big", signed=True
    )
    ident = sql.Identifier(namespace)
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
            " name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
        )
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        current = int(row[0]) if row else 0
        for number, path in pending_migrations(MIGRATIONS_DIR, current):
            conn.execute(path.read_text(encoding="utf-8").encode("utf-8"))
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, %s)",
                (number, path.name, time.time()),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.pgconn.transaction_status != psycopg.pq.TransactionStatus.UNKNOWN:
            conn.execute("ROLLBACK")
        raise
