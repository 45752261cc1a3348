"""The blobs table: content-addressed bytes (history messages and nodes, large results)."""

from __future__ import annotations

from collections.abc import Iterable

from durability.store._postgres.base import PostgresBase

# A history chain's nodes from its head, in one query: each node's "base" names the next.
# Nothing here is trusted: the caller verifies every node against its hash. The base is
# found with a pattern on the bytes escaped to text, which never fails on damaged bytes
# (a cast to JSON would abort the whole read transaction): a node without it ends the
# walk, ``n`` bounds a cycle.
_CHAIN = (
    "WITH RECURSIVE chain(hash, data, n) AS ("
    " SELECT hash, data, 1 FROM blobs WHERE hash = %s"
    " UNION ALL SELECT b.hash, b.data, chain.n + 1 FROM chain JOIN blobs b"
    " ON b.hash = substring(encode(chain.data, 'escape') from '\"base\":\"([0-9a-f]{64})\"')"
    " WHERE chain.n < %s)"
    " SELECT hash, data FROM chain"
)


class BlobRows(PostgresBase):
    def put_blob(self, blob_hash: str, data: bytes, now: float) -> bool:
        inserted = self.scalar(
            "INSERT INTO blobs (hash, size, data, created_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING RETURNING hash",
            (blob_hash, len(data), data, now),
        )
        return inserted is not None

    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        rows = self.conn.execute(
            "SELECT hash, data FROM blobs WHERE hash = ANY(%s)", (wanted,)
        ).fetchall()
        return {h: bytes(d) for h, d in rows}

    def history_chain(self, head: str, limit: int) -> dict[str, bytes]:
        rows = self.conn.execute(_CHAIN, (head, limit)).fetchall()
        return {h: bytes(d) for h, d in rows}
