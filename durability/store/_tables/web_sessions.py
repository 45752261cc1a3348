"""The web_sessions table (durability/web_sessions.py), for both engines, in plain SQL."""

from __future__ import annotations

from durability.store._shapes import Shape
from durability.store._sql import Table
from durability.store.rows import WebSessionRow

SESSIONS = Shape(
    WebSessionRow,
    convert={
        "id_digest": str,
        "generation": str,
        "authenticated": bool,
        "csrf_token": str,
        "created_at": float,
        "last_seen": float,
        "expires_at": float,
    },
)
_INSERT = f"INSERT INTO web_sessions ({SESSIONS.select}) VALUES ({SESSIONS.placeholders()})"


class WebSessionTable(Table):
    def insert(self, row: WebSessionRow, keep: int) -> None:
        """Store a new session, dropping expired ones and, past ``keep`` sessions, the
        least recently seen."""
        sql = self.sql
        sql.run("DELETE FROM web_sessions WHERE expires_at <= ?", (row.created_at,))
        count = int(sql.scalar("SELECT COUNT(*) FROM web_sessions") or 0)
        if count >= keep:
            sql.run(
                "DELETE FROM web_sessions WHERE id_digest IN (SELECT id_digest FROM"
                " web_sessions ORDER BY last_seen, id_digest LIMIT ?)",
                (count - keep + 1,),
            )
        sql.run(_INSERT, SESSIONS.values(row, authenticated=1 if row.authenticated else 0))

    def get(self, id_digest: str) -> WebSessionRow | None:
        return self.sql.one(
            SESSIONS,
            f"SELECT {SESSIONS.select} FROM web_sessions WHERE id_digest = ?",
            (id_digest,),
        )

    def touch(self, id_digest: str, last_seen: float, expires_at: float) -> None:
        self.sql.run(
            "UPDATE web_sessions SET last_seen = ?, expires_at = ? WHERE id_digest = ?",
            (last_seen, expires_at, id_digest),
        )

    def delete(self, id_digest: str | None, generation: str | None) -> int:
        """Delete the session ``id_digest``, or (``id_digest`` None) every session of
        ``generation`` (every session when that is None too); how many were deleted."""
        if id_digest is not None:
            cursor = self.sql.run("DELETE FROM web_sessions WHERE id_digest = ?", (id_digest,))
        elif generation is not None:
            cursor = self.sql.run("DELETE FROM web_sessions WHERE generation = ?", (generation,))
        else:
            cursor = self.sql.run("DELETE FROM web_sessions")
        return max(0, int(cursor.rowcount))
