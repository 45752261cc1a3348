"""The blobs table: content-addressed bytes (history messages and nodes, large results)."""

from __future__ import annotations

from collections.abc import Iterable

from durability.store._sql import Table


class BlobTable(Table):
    def put(self, blob_hash: str, data: bytes, now: float) -> bool:
        """Store bytes under their hash once; True when they were new."""
        cur = self.sql.run(
            "INSERT INTO blobs (hash, size, data, created_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (blob_hash, len(data), data, now),
        )
        return bool(cur.rowcount == 1)

    def get_many(self, hashes: Iterable[str]) -> dict[str, bytes]:
        sql = self.sql
        found: dict[str, bytes] = {}
        for batch in sql.batches(hashes):
            where, args = sql.among("hash", batch)
            rows = sql.run(f"SELECT hash, data FROM blobs WHERE {where}", args).fetchall()
            found.update((h, bytes(d)) for h, d in rows)
        return found

    def history_chain(self, head: str, limit: int) -> dict[str, bytes]:
        """Read ahead: the blobs of a history chain from ``head`` (each node's ``base``
        names the next), at most ``limit``, unverified; the caller verifies each and reads
        any that is missing on its own."""
        rows = self.sql.conn.execute(self.sql.chain_sql, (head, limit)).fetchall()
        return {h: bytes(d) for h, d in rows}
