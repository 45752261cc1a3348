"""pgvector on a PostgreSQL journal: memory ranking in the server when it has the extension.

Chosen when the store opens (``prepare``): if the server offers the ``vector`` extension,
it is created (when the role may), the ``memories`` table gets an ``embedding vector``
column beside its float32 ``vector`` bytes, rows without it are filled, and every write of
a vector through ``PgvectorMemories`` fills it too. Ranking is then exact cosine in SQL
(``<=>``: no approximate index, since memories of different models have different
dimensions). Without the extension (Debian 12 ships none), or when it cannot be created,
the store searches exactly on the worker with numpy, and says why in
``memory_search_problem``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from psycopg import sql as pgsql

from durability.store._tables.memories import MemoryTable, Ranking
from durability.store.rows import MemoryRow

_BATCH = 256


def vector_text(data: bytes) -> str:
    """float32 little-endian bytes as pgvector's text input ``[x,y,...]``."""
    from array import array

    values = array("f")
    values.frombytes(bytes(data))
    return "[" + ",".join(repr(v) for v in values.tolist()) + "]"


def prepare(conn: Any) -> tuple[str, str]:
    """(the extension's schema, "") when pgvector ranks memories here; ("", why) when not."""
    import psycopg

    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return "", f"pgvector is available but could not be created: {first}"
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
        " WHERE e.extname = 'vector'"
    ).fetchone()
    if not row:
        return "", "pgvector is not installed in this database"
    schema = str(row[0])
    vector = pgsql.SQL("{}.vector").format(pgsql.Identifier(schema))
    conn.execute(
        pgsql.SQL("ALTER TABLE memories ADD COLUMN IF NOT EXISTS embedding {}").format(vector)
    )
    while True:  # rows stored before pgvector (or by a worker without it) get their column
        rows = conn.execute(
            "SELECT id, vector FROM memories WHERE embedding IS NULL LIMIT %s", (_BATCH,)
        ).fetchall()
        if not rows:
            break
        for memory_id, data in rows:
            conn.execute(
                pgsql.SQL("UPDATE memories SET embedding = %s::{} WHERE id = %s").format(vector),
                (vector_text(data), memory_id),
            )
    return schema, ""


@cache
@dataclass(frozen=True)
class SearchChoice:
    """How this server's memories are searched: ``pgvector`` (its available version in
    ``version``, its schema in ``schema``), else ``exact`` on the worker with numpy, else
    ``unavailable`` (``problem`` says why)."""

    version: str
    schema: str
    backend: str
    problem: str


def choose(conn: Any) -> SearchChoice:
    """pgvector in SQL when the server has the extension, else exact search on the worker."""
    row = conn.execute(
        "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
    ).fetchone()
    version = str(row[0]) if row and row[0] else ""
    schema, problem = prepare(conn) if version else ("", "")
    if schema:
        return SearchChoice(version, schema, "pgvector", "")
    try:
        import numpy  # noqa: F401
    except ImportError:
        return SearchChoice(
            version,
            "",
            "unavailable",
            "numpy is not installed (pip install -r requirements-postgres.txt)",
        )
    return SearchChoice(version, "", "exact", problem)


def memories_table(schema: str) -> type[MemoryTable]:
    """The memories table of a transaction on a store where pgvector ranks in ``schema``."""
    quoted = '"' + schema.replace('"', '""') + '"'

    class PgvectorMemories(MemoryTable):
        def _embed(self, memory_id: str, data: bytes) -> None:
            self.sql.run(
                f"UPDATE memories SET embedding = ?::{quoted}.vector WHERE id = ?",
                (vector_text(data), memory_id),
            )

        def insert(self, row: MemoryRow, vector: bytes) -> None:
            super().insert(row, vector)
            self._embed(row.id, vector)

        def update(
            self, subdir: str, memory_id: str, changes: Mapping[str, Any], vector: bytes | None
        ) -> bool:
            changed = super().update(subdir, memory_id, changes, vector)
            if changed and vector is not None:
                self._embed(memory_id, vector)
            return changed

        def sync_embeddings(self, ids: Sequence[str]) -> None:
            """Vectors changed by another table's statement (a re-embed's swap): the column
            follows the stored bytes."""
            for batch in self.sql.batches(ids):
                where, args = self.sql.among("id", batch)
                found = self.sql.run(f"SELECT id, vector FROM memories WHERE {where}", args)
                for memory_id, data in found.fetchall():
                    self._embed(str(memory_id), bytes(data))

        batch = _BATCH

        def ranking(self, query: bytes) -> Ranking:
            distance = f"(embedding OPERATOR({quoted}.<=>) ?::{quoted}.vector)"
            text = vector_text(query)
            return Ranking(
                f"SELECT id, 1.0 - {distance} AS score FROM memories",
                [text],
                f"embedding IS NOT NULL AND 1.0 - {distance} >= ?",
                [text],
            )

    return PgvectorMemories
