"""The documents and conflicts tables."""

from __future__ import annotations

from typing import Any

from durability.records import Conflict
from durability.store._shapes import Shape, dump
from durability.store._sql import Table
from durability.store.rows import DocumentRow

DOCUMENTS = Shape(DocumentRow)
CONFLICTS = Shape(Conflict, json=("proposed",))


class DocumentTable(Table):
    def get(self, context_id: str, kind: str) -> DocumentRow | None:
        return self.sql.one(
            DOCUMENTS,
            f"SELECT {DOCUMENTS.select} FROM documents WHERE context_id = ? AND kind = ?"
            f"{self.sql.lock}",
            (context_id, kind),
        )

    def list(self) -> list[DocumentRow]:
        """Every stored document (for ``verify``)."""
        return self.sql.all(
            DOCUMENTS, f"SELECT {DOCUMENTS.select} FROM documents ORDER BY context_id, kind"
        )

    def put(self, row: DocumentRow) -> None:
        self.sql.run(
            f"INSERT INTO documents ({DOCUMENTS.select}) VALUES ({DOCUMENTS.placeholders()})"
            " ON CONFLICT (context_id, kind) DO UPDATE"
            " SET revision = excluded.revision, body = excluded.body, digest = excluded.digest,"
            " updated_at = excluded.updated_at, updated_by = excluded.updated_by",
            DOCUMENTS.values(row),
        )


class ConflictTable(Table):
    def insert(
        self,
        context_id: str,
        kind: str,
        expected_revision: int,
        actual_revision: int,
        proposed: object,
        actor: str,
        now: float,
    ) -> int:
        return self.sql.insert_id(
            "INSERT INTO conflicts (context_id, kind, expected_revision, actual_revision,"
            " proposed, actor, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (context_id, kind, expected_revision, actual_revision, dump(proposed), actor, now),
        )

    def get(self, conflict_id: int) -> Conflict | None:
        return self.sql.one(
            CONFLICTS,
            f"SELECT {CONFLICTS.select} FROM conflicts WHERE id = ?{self.sql.lock}",
            (conflict_id,),
        )

    def list(self, context_id: str | None, unresolved_only: bool) -> list[Conflict]:
        where: list[str] = []
        args: list[Any] = []
        if context_id is not None:
            where.append("context_id = ?")
            args.append(context_id)
        if unresolved_only:
            where.append("resolved_at IS NULL")
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        return self.sql.all(
            CONFLICTS, f"SELECT {CONFLICTS.select} FROM conflicts {clause} ORDER BY id", args
        )

    def resolve(self, conflict_id: int, resolution: str, actor: str, now: float) -> None:
        self.sql.run(
            "UPDATE conflicts SET resolved_at = ?, resolution = ?, resolved_by = ? WHERE id = ?",
            (now, resolution, actor, conflict_id),
        )
