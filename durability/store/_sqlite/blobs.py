"""The blobs table: content-addressed bytes (history messages and nodes, large results)."""

from __future__ import annotations

from collections.abc import Iterable

from durability.store._sqlite.base import SqliteBase, placeholders

# A history chain's nodes from its head, in one query: each node's "base" names the next.
# Nothing here is trusted: the caller verifies every node against its hash. The base is
# cut out of the node's canonical JSON text (keys sorted: "add" holds only hashes, so the
# first '"base":"' is the key); a node without one ends the walk, ``n`` bounds a cycle.
_TEXT = "CAST(chain.data AS TEXT)"
_CHAIN = (
    "WITH RECURSIVE chain(hash, data, n) AS ("
    " SELECT hash, data, 1 FROM blobs WHERE hash = ?"
    " UNION ALL SELECT b.hash, b.data, chain.n + 1 FROM chain JOIN blobs b"
    f' ON b.hash = substr({_TEXT}, instr({_TEXT}, \'"base":"\') + 8, 64)'
    " WHERE chain.n < ?)"
    " SELECT hash, data FROM chain"
)


class BlobRows(SqliteBase):
    def put_blob(self, blob_hash: str, data: bytes, now: float) -> bool:
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO blobs (hash, size, data, created_at) VALUES (?, ?, ?, ?)",
            (blob_hash, len(data), data, now),
        )
        return cur.rowcount == 1

    def get_blobs(self, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, bytes] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = self.conn.execute(
                f"SELECT hash, data FROM blobs WHERE hash IN ({placeholders(len(chunk))})",
                chunk,
            ).fetchall()
            found.update((h, bytes(d)) for h, d in rows)
        return found

    def history_chain(self, head: str, limit: int) -> dict[str, bytes]:
        rows = self.conn.execute(_CHAIN, (head, limit)).fetchall()
        return {h: bytes(d) for h, d in rows}
