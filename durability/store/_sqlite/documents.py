"""The documents and conflicts tables."""

from __future__ import annotations

from typing import Any

from durability.records import Conflict
from durability.store._rows import CONFLICTS, DOCUMENTS, conflict_record, document_row, dump
from durability.store._sqlite.base import SqliteBase
from durability.store.base import DocumentRow


class DocumentRows(SqliteBase):
    def get_document(self, context_id: str, kind: str) -> DocumentRow | None:
        row = self.one(
            DOCUMENTS,
            f"SELECT {DOCUMENTS.select} FROM documents WHERE context_id = ? AND kind = ?",
            (context_id, kind),
        )
        return document_row(row) if row else None

    def list_documents(self) -> list[DocumentRow]:
        rows = self.all(
            DOCUMENTS, f"SELECT {DOCUMENTS.select} FROM documents ORDER BY context_id, kind"
        )
        return [document_row(r) for r in rows]

    def put_document(self, row: DocumentRow) -> None:
        self.conn.execute(
            "INSERT INTO documents (context_id, kind, revision, body, digest, updated_at,"
            " updated_by) VALUES (:context_id, :kind, :revision, :body, :digest, :updated_at,"
            " :updated_by) ON CONFLICT (context_id, kind) DO UPDATE SET"
            " revision = excluded.revision, body = excluded.body, digest = excluded.digest,"
            " updated_at = excluded.updated_at, updated_by = excluded.updated_by",
            {
                "context_id": row.context_id,
                "kind": row.kind,
                "revision": row.revision,
                "body": row.body,
                "digest": row.digest,
                "updated_at": row.updated_at,
                "updated_by": row.updated_by,
            },
        )

    def insert_conflict(
        self,
        context_id: str,
        kind: str,
        expected_revision: int,
        actual_revision: int,
        proposed: object,
        actor: str,
        now: float,
    ) -> int:
        cur = self.conn.execute(
            "INSERT INTO conflicts (context_id, kind, expected_revision, actual_revision,"
            " proposed, actor, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (context_id, kind, expected_revision, actual_revision, dump(proposed), actor, now),
        )
        return int(cur.lastrowid or 0)

    def get_conflict(self, conflict_id: int) -> Conflict | None:
        row = self.one(
            CONFLICTS, f"SELECT {CONFLICTS.select} FROM conflicts WHERE id = ?", (conflict_id,)
        )
        return conflict_record(row) if row else None

    def list_conflicts(self, context_id: str | None, unresolved_only: bool) -> list[Conflict]:
        where: list[str] = []
        args: list[Any] = []
        if context_id is not None:
            where.append("context_id = ?")
            args.append(context_id)
        if unresolved_only:
            where.append("resolved_at IS NULL")
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self.all(
            CONFLICTS, f"SELECT {CONFLICTS.select} FROM conflicts {clause} ORDER BY id", args
        )
        return [conflict_record(r) for r in rows]

    def resolve_conflict(self, conflict_id: int, resolution: str, actor: str, now: float) -> None:
        self.conn.execute(
            "UPDATE conflicts SET resolved_at = ?, resolution = ?, resolved_by = ? WHERE id = ?",
            (now, resolution, actor, conflict_id),
        )
