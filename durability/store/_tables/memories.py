"""The memories and embedding_cache tables (durability/memory.py), for both engines.

Vectors are float32 little-endian bytes. The shared table reads candidate vectors for an
exact search on the worker (``vectors``); SQLite swaps in ``SqliteMemories``, which ranks
in SQL with sqlite-vec's ``vec_distance_cosine`` (durability/store/sqlite_tx.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from durability.store._shapes import Shape
from durability.store._sql import Table
from durability.store.rows import MemoryRow

#: The "model" of rows that hold a subdir's behaviour rules (behaviour_adjustment), not
#: memories: no embedding model has this name, so no search ranks them, and listings,
#: counts and re-embedding leave them out.
RULES_MODEL = "behaviour-rules"

MEMORIES = Shape(
    MemoryRow,
    json=("metadata",),
    convert={"dim": int, "created_at": float, "updated_at": float},
)
_COLUMNS = (*MEMORIES.names, "vector")
_INSERT = f"INSERT INTO memories ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"


def area_clause(areas: Sequence[str] | None) -> tuple[str, list[Any]]:
    """`` AND area IN (...)`` and its arguments (nothing when every area is wanted)."""
    if not areas:
        return "", []
    return f" AND area IN ({', '.join('?' * len(areas))})", list(areas)


class Ranking(NamedTuple):
    """An engine's ranking in SQL: ``select`` reads ``id`` and ``score`` FROM memories
    (its ``?`` bound to ``select_args``); ``keep`` is the condition that keeps a row whose
    score is at least the last ``?`` (bound to ``keep_args`` then the minimum cosine)."""

    select: str
    select_args: list[Any]
    keep: str
    keep_args: list[Any]


class MemoryTable(Table):
    #: the subdir condition of a lookup by ids (SQLite's keeps its planner on the id index)
    _BY_IDS = "subdir = ?"

    def insert(self, row: MemoryRow, vector: bytes) -> None:
        values = (*MEMORIES.values(row), vector)
        self.sql.run(_INSERT, values)

    def update(
        self, subdir: str, memory_id: str, changes: Mapping[str, Any], vector: bytes | None
    ) -> bool:
        """Set ``changes`` (area, text, metadata as JSON text, model, dim, updated_at) and the
        vector when given; False when there is no such memory."""
        names = [*changes, *(["vector"] if vector is not None else [])]
        values = [*changes.values(), *([vector] if vector is not None else [])]
        assignments = ", ".join(f"{name} = ?" for name in names)
        cursor = self.sql.run(
            f"UPDATE memories SET {assignments} WHERE subdir = ? AND id = ?",
            (*values, subdir, memory_id),
        )
        return bool(cursor.rowcount)

    def get(self, subdir: str, ids: Sequence[str]) -> list[MemoryRow]:
        found: list[MemoryRow] = []
        for batch in self.sql.batches(ids):
            where, args = self.sql.among("id", batch)
            found += self.sql.all(
                MEMORIES,
                f"SELECT {MEMORIES.select} FROM memories WHERE {self._BY_IDS} AND {where}",
                (subdir, *args),
            )
        return found

    def delete(self, subdir: str, ids: Sequence[str]) -> int:
        deleted = 0
        for batch in self.sql.batches(ids):
            where, args = self.sql.among("id", batch)
            cursor = self.sql.run(
                f"DELETE FROM memories WHERE {self._BY_IDS} AND {where}", (subdir, *args)
            )
            deleted += max(0, int(cursor.rowcount))
        return deleted

    def newest(
        self, subdir: str, areas: Sequence[str] | None, limit: int, offset: int = 0
    ) -> list[MemoryRow]:
        clause, args = area_clause(areas)
        return self.sql.all(
            MEMORIES,
            f"SELECT {MEMORIES.select} FROM memories WHERE subdir = ? AND model <> ?{clause}"
            " ORDER BY created_at DESC, id LIMIT ? OFFSET ?",
            (subdir, RULES_MODEL, *args, limit, offset),
        )

    def count(self, subdir: str) -> dict[str, int]:
        """How many memories each area of ``subdir`` holds."""
        rows = self.sql.run(
            "SELECT area, COUNT(*) FROM memories WHERE subdir = ? AND model <> ? GROUP BY area",
            (subdir, RULES_MODEL),
        ).fetchall()
        return {str(area): int(n) for area, n in rows}

    def subdirs(self) -> list[str]:
        return [str(s) for s in self.sql.scalars("SELECT DISTINCT subdir FROM memories")]

    def vectors(
        self, subdir: str, model: str, dim: int, areas: Sequence[str] | None
    ) -> list[tuple[str, bytes]]:
        """(id, vector) of every candidate of an exact search on the worker."""
        clause, args = area_clause(areas)
        rows = self.sql.run(
            "SELECT id, vector FROM memories WHERE subdir = ? AND model = ? AND dim = ?" + clause,
            (subdir, model, dim, *args),
        ).fetchall()
        return [(str(i), bytes(v)) for i, v in rows]

    def matrix_state(self) -> tuple[int, int, int, int] | None:
        """(updates that moved a vector, deletes, the highest ``seq`` ever deleted, the
        newest memory's ``seq``) as this transaction sees them, for a process that keeps
        the vectors in memory (durability/memory/_matrix.py); None on an engine that does
        not track them (the vectors are read per search)."""
        return None

    def matrix_seqs(self, subdir: str, model: str) -> list[int]:
        """The ``seq`` of every memory of ``subdir`` and ``model`` (any dimension)."""
        raise NotImplementedError(f"{type(self).__name__} does not track memory changes")

    def matrix_rows(
        self, subdir: str, model: str, dim: int, after: int
    ) -> Iterator[tuple[int, str, str, bytes]]:
        """(seq, id, area, vector) of the memories of ``subdir``, ``model`` and ``dim`` with
        a ``seq`` above ``after``, in ``seq`` order; only where ``matrix_state`` is kept."""
        raise NotImplementedError(f"{type(self).__name__} does not track memory changes")

    def nearest(
        self,
        subdir: str,
        model: str,
        query: bytes,
        dim: int,
        areas: Sequence[str] | None,
        min_cosine: float,
        limit: int | None,
    ) -> Iterator[tuple[MemoryRow, float]]:
        """The memories at or above ``min_cosine``, best first, with their cosine; only an
        engine that ranks in SQL has it (the others search ``vectors`` on the worker): it
        gives its ``ranking``, the ids are ranked, then the winners read in batches."""
        rank = self.ranking(query)
        clause, args = area_clause(areas)
        tail = " LIMIT ?" if limit is not None else ""
        statement = (
            f"{rank.select} WHERE subdir = ? AND model = ? AND dim = ?{clause}"
            f" AND {rank.keep} ORDER BY score DESC, id{tail}"
        )
        values = [*rank.select_args, subdir, model, dim, *args, *rank.keep_args, min_cosine]
        if limit is not None:
            values.append(limit)
        ranked = [(str(i), float(score)) for i, score in self.sql.run(statement, values)]
        for start in range(0, len(ranked), self.batch):
            chunk = ranked[start : start + self.batch]
            rows = {row.id: row for row in self.get(subdir, [i for i, _ in chunk])}
            for memory_id, score in chunk:
                if memory_id in rows:
                    yield rows[memory_id], score

    #: Winners read by one ``get``.
    batch = 256

    def ranking(self, query: bytes) -> Ranking:
        """How this engine scores ``query`` in SQL (see ``Ranking``)."""
        raise NotImplementedError(f"{type(self).__name__} does not rank in SQL")


class EmbeddingCacheTable(Table):
    def get(self, model: str, digests: Sequence[str]) -> dict[str, tuple[int, bytes]]:
        found: dict[str, tuple[int, bytes]] = {}
        for batch in self.sql.batches(digests):
            where, args = self.sql.among("digest", batch)
            rows = self.sql.run(
                f"SELECT digest, dim, vector FROM embedding_cache WHERE model = ? AND {where}",
                (model, *args),
            ).fetchall()
            found.update((str(d), (int(n), bytes(v))) for d, n, v in rows)
        return found

    def put(self, model: str, vectors: Mapping[str, tuple[int, bytes]], now: float) -> None:
        for digest, (dim, vector) in vectors.items():
            self.sql.run(
                "INSERT INTO embedding_cache (model, digest, dim, vector, created_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (model, digest) DO NOTHING",
                (model, digest, dim, vector, now),
            )

    def drop_model(self, model: str) -> int:
        cursor = self.sql.run("DELETE FROM embedding_cache WHERE model = ?", (model,))
        return max(0, int(cursor.rowcount))
