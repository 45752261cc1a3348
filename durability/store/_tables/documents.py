"""The documents and conflicts tables."""

from __future__ import annotations

from typing import Any

from durability.records import Conflict
from durability.store._rows import CONFLICTS, DOCUMENTS, conflict_record, document_row, dump
from durability.store._sql import SqlTx
from durability.store.base import DocumentRow


class DocumentRows(SqlTx):
    def get_document(self, context_id: str, kind: str) -> DocumentRow | None:
        row = self.one(
            DOCUMENTS,
            f"SELECT {DOCUMENTS.select} FROM documents WHERE context_id = ? AND kind = ?"
            f"{self.lock}",
            (context_id, kind),
        )
        return document_row(row) if row else None

    def list_documents(self) -> list[DocumentRow]:
        rows = self.all(
            DOCUMENTS, f"SELECT {DOCUMENTS.select} FROM documents ORDER BY context_id, kind"
        )
        return [document_row(r) for r in rows]

    def put_document(self, row: DocumentRow) -> None:
        self.run(
            "INSERT INTO documents (context_id, kind, revision, body, digest, updated_at,"
            " updated_by) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (context_id, kind) DO UPDATE"
            " SET revision = excluded.revision, body = excluded.body, digest = excluded.digest,"
            " updated_at = excluded.updated_at, updated_by = excluded.updated_by",
            (
                row.context_id,
                row.kind,
                row.revision,
                row.body,
                row.digest,
                row.updated_at,
                row.updated_by,
            ),
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
        return self.insert_id(
            "INSERT INTO conflicts (context_id, kind, expected_revision, actual_revision,"
            " proposed, actor, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (context_id, kind, expected_revision, actual_revision, dump(proposed), actor, now),
        )

    def get_conflict(self, conflict_id: int) -> Conflict | None:
        row = self.one(
            CONFLICTS,
            f"SELECT {CONFLICTS.select} FROM conflicts WHERE id = ?{self.lock}",
            (conflict_id,),
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
        self.run(
            "UPDATE conflicts SET resolved_at = ?, resolution = ?, resolved_by = ? WHERE id = ?",
            (now, resolution, actor, conflict_id),
        )
