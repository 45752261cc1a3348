"""The blobs table: content-addressed bytes (history messages and nodes, large results)."""

from __future__ import annotations

from collections.abc import Iterable

from durability.store._sql import SqlTx


class BlobRows(SqlTx):
    def put_blob(self, blob_hash: str, data: bytes, now: float) -> bool:
        cur = self.run(
            "INSERT INTO blobs (hash, size, data, created_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (blob_hash, len(data), data, now),
        )
        return bool(cur.rowcount == 1)

    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for batch in self.batches(hashes):
            where, args = self.among("hash", batch)
            rows = self.run(f"SELECT hash, data FROM blobs WHERE {where}", args).fetchall()
            found.update((h, bytes(d)) for h, d in rows)
        return found

    def history_chain(self, head: str, limit: int) -> dict[str, bytes]:
        rows = self.conn.execute(self.chain_sql, (head, limit)).fetchall()
        return {h: bytes(d) for h, d in rows}
