"""The knowledge_files and memory_models tables, and the memory-wide queries that knowledge
import and re-embedding need (durability/memory/_knowledge.py, _reembed.py), for both
engines. Added beside durability/store/_tables/memories.py, which they only read through."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from durability.store._sql import Table
from durability.store._tables.memories import RULES_MODEL


@dataclass(frozen=True)
class KnowledgeFileRow:
    subdir: str
    path: str
    area: str
    digest: str
    ids: tuple[str, ...]
    imported_at: float


def _ids(text: object) -> tuple[str, ...]:
    try:
        value = json.loads(str(text))
    except ValueError:
        return ()
    return tuple(str(i) for i in value) if isinstance(value, list) else ()


class KnowledgeFileTable(Table):
    def all(self, subdir: str) -> list[KnowledgeFileRow]:
        rows = self.sql.run(
            "SELECT subdir, path, area, digest, ids, imported_at FROM knowledge_files"
            " WHERE subdir = ? ORDER BY path",
            (subdir,),
        ).fetchall()
        return [
            KnowledgeFileRow(str(s), str(p), str(a), str(d), _ids(i), float(t))
            for s, p, a, d, i, t in rows
        ]

    def get(self, subdir: str, path: str) -> KnowledgeFileRow | None:
        return next((r for r in self._one(subdir, path)), None)

    def _one(self, subdir: str, path: str) -> list[KnowledgeFileRow]:
        rows = self.sql.run(
            "SELECT subdir, path, area, digest, ids, imported_at FROM knowledge_files"
            f" WHERE subdir = ? AND path = ?{self.sql.lock}",
            (subdir, path),
        ).fetchall()
        return [
            KnowledgeFileRow(str(s), str(p), str(a), str(d), _ids(i), float(t))
            for s, p, a, d, i, t in rows
        ]

    def claim(self, row: KnowledgeFileRow) -> bool:
        """Record ``row`` unless the file is already recorded with this digest: True when
        this transaction now owns the import (concurrent importers of the same file content
        race here; the loser writes nothing)."""
        cursor = self.sql.run(
            "INSERT INTO knowledge_files (subdir, path, area, digest, ids, imported_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (subdir, path) DO UPDATE SET"
            " area = excluded.area, digest = excluded.digest, ids = excluded.ids,"
            " imported_at = excluded.imported_at"
            " WHERE knowledge_files.digest <> excluded.digest",
            (
                row.subdir,
                row.path,
                row.area,
                row.digest,
                json.dumps(list(row.ids)),
                row.imported_at,
            ),
        )
        return bool(cursor.rowcount)

    def drop(self, subdir: str, path: str, digest: str) -> bool:
        """Forget the file if it is still recorded with ``digest``."""
        cursor = self.sql.run(
            "DELETE FROM knowledge_files WHERE subdir = ? AND path = ? AND digest = ?",
            (subdir, path, digest),
        )
        return bool(cursor.rowcount)


class MemoryModelTable(Table):
    """How to reach each embedding model that made stored vectors (never a key)."""

    def put(self, model: str, config: str, now: float) -> None:
        self.sql.run(
            "INSERT INTO memory_models (model, config, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (model) DO UPDATE SET config = excluded.config,"
            " updated_at = excluded.updated_at",
            (model, config, now),
        )

    def get(self, model: str) -> str | None:
        found = self.sql.scalar("SELECT config FROM memory_models WHERE model = ?", (model,))
        return None if found is None else str(found)

    def stored_models(self) -> dict[str, int]:
        """How many memories each embedding model made, over every subdir (behaviour rules
        rows are no memories: left out)."""
        rows = self.sql.run(
            "SELECT model, COUNT(*) FROM memories WHERE model <> ? GROUP BY model", (RULES_MODEL,)
        ).fetchall()
        return {str(m): int(n) for m, n in rows}

    def texts(self, model: str, after: str, limit: int) -> list[tuple[str, str, str]]:
        """(id, subdir, text) of memories made by ``model``, by id after ``after``."""
        rows = self.sql.run(
            "SELECT id, subdir, text FROM memories WHERE model = ? AND id > ? ORDER BY id LIMIT ?",
            (model, after, limit),
        ).fetchall()
        return [(str(i), str(s), str(t)) for i, s, t in rows]

    def set_vectors(self, old_model: str, new_model: str, vectors: Sequence[tuple]) -> int:
        """Give each (id, text digest check, dim, vector) its vector of ``new_model``, for
        memories still made by ``old_model`` whose text is unchanged; how many changed."""
        changed = 0
        for memory_id, text, dim, vector in vectors:
            cursor = self.sql.run(
                "UPDATE memories SET model = ?, dim = ?, vector = ?"
                " WHERE id = ? AND model = ? AND text = ?",
                (new_model, dim, vector, memory_id, old_model, text),
            )
            changed += max(0, int(cursor.rowcount))
        return changed
