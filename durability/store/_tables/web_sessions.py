"""The web_sessions table (durability/web_sessions.py), for both engines, in plain SQL."""

from __future__ import annotations

from durability.store._rows import Columns
from durability.store._sql import SqlTx
from durability.store.base import WebSessionRow

SESSIONS = Columns(
    "id_digest",
    "generation",
    "authenticated",
    "csrf_token",
    "created_at",
    "last_seen",
    "expires_at",
)
_INSERT = (
    f"INSERT INTO web_sessions ({SESSIONS.select}) VALUES ({', '.join('?' * len(SESSIONS.names))})"
)


def _row(values: tuple[object, ...]) -> WebSessionRow:
    r = SESSIONS.named(values)
    return WebSessionRow(
        id_digest=str(r["id_digest"]),
        generation=str(r["generation"]),
        authenticated=bool(r["authenticated"]),
        csrf_token=str(r["csrf_token"]),
        created_at=float(r["created_at"]),  # type: ignore[arg-type]
        last_seen=float(r["last_seen"]),  # type: ignore[arg-type]
        expires_at=float(r["expires_at"]),  # type: ignore[arg-type]
    )


class WebSessionRows(SqlTx):
    def insert_web_session(self, row: WebSessionRow, keep: int) -> None:
        self.run("DELETE FROM web_sessions WHERE expires_at <= ?", (row.created_at,))
        count = int(self.scalar("SELECT COUNT(*) FROM web_sessions") or 0)
        if count >= keep:
            self.run(
                "DELETE FROM web_sessions WHERE id_digest IN (SELECT id_digest FROM"
                " web_sessions ORDER BY last_seen, id_digest LIMIT ?)",
                (count - keep + 1,),
            )
        values = (
            row.id_digest,
            row.generation,
            1 if row.authenticated else 0,
            row.csrf_token,
            row.created_at,
            row.last_seen,
            row.expires_at,
        )
        self.run(_INSERT, values)

    def get_web_session(self, id_digest: str) -> WebSessionRow | None:
        found = self.run(
            f"SELECT {SESSIONS.select} FROM web_sessions WHERE id_digest = ?", (id_digest,)
        ).fetchone()
        return None if found is None else _row(tuple(found))

    def touch_web_session(self, id_digest: str, last_seen: float, expires_at: float) -> None:
        self.run(
            "UPDATE web_sessions SET last_seen = ?, expires_at = ? WHERE id_digest = ?",
            (last_seen, expires_at, id_digest),
        )

    def delete_web_sessions(self, id_digest: str | None, generation: str | None) -> int:
        if id_digest is not None:
            cursor = self.run("DELETE FROM web_sessions WHERE id_digest = ?", (id_digest,))
        elif generation is not None:
            cursor = self.run("DELETE FROM web_sessions WHERE generation = ?", (generation,))
        else:
            cursor = self.run("DELETE FROM web_sessions")
        return max(0, int(cursor.rowcount))
