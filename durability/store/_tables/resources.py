"""The resource_files and resource_snapshots tables (durability/resources.py): encrypted
bytes only. PostgreSQL only (shared workers' resources)."""

from __future__ import annotations

from durability.store._shapes import Shape
from durability.store._sql import Table
from durability.store.rows import SnapshotRow

SNAPSHOTS = Shape(SnapshotRow, convert={"manifest": bytes})


class ResourceTable(Table):
    def existing_addresses(self, addresses: list[str]) -> set[str]:
        if not addresses:
            return set()
        rows = self.sql.run(
            "SELECT address FROM resource_files WHERE address = ANY(%s)", (addresses,)
        ).fetchall()
        return {str(r[0]) for r in rows}

    def insert_file(self, address: str, size: int, data: bytes, now: float) -> None:
        self.sql.run(
            "INSERT INTO resource_files (address, size, data, created_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (address, size, data, now),
        )

    def insert_snapshot(
        self,
        context_id: str,
        run_id: str | None,
        kind: str,
        manifest: bytes,
        total: int,
        now: float,
    ) -> int:
        return int(
            self.sql.scalar(
                "INSERT INTO resource_snapshots (context_id, run_id, kind, manifest, total_size,"
                " created_at) VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (context_id, run_id, kind, manifest, total, now),
            )
        )

    def get_snapshot(self, snapshot_id: int) -> SnapshotRow | None:
        return self.sql.one(
            SNAPSHOTS,
            f"SELECT {SNAPSHOTS.select} FROM resource_snapshots WHERE id = %s",
            (snapshot_id,),
        )

    def latest_snapshot(self, context_id: str, kind: str, run_id: str | None) -> SnapshotRow | None:
        """The newest snapshot of ``kind`` of a chat, or of one run."""
        column, value = ("context_id", context_id) if run_id is None else ("run_id", run_id)
        return self.sql.one(
            SNAPSHOTS,
            f"SELECT {SNAPSHOTS.select} FROM resource_snapshots WHERE {column} = %s"
            " AND kind = %s ORDER BY id DESC LIMIT 1",
            (value, kind),
        )

    def get_files(self, addresses: list[str]) -> dict[str, bytes]:
        if not addresses:
            return {}
        rows = self.sql.run(
            "SELECT address, data FROM resource_files WHERE address = ANY(%s)", (addresses,)
        ).fetchall()
        return {str(a): bytes(d) for a, d in rows}
