"""Browser sessions of the web UI, kept in the journal's database (SQLite or PostgreSQL).

A session is known by a random id (``secrets.token_urlsafe(32)``) that only the browser
holds, in its cookie; the table keeps the id's SHA-256, so neither a copy of the database
nor a log line can open a session. Each session belongs to a *generation*: a fingerprint of
the login credentials it was made under. A session of another generation is refused, and
start-up deletes the sessions of the previous credentials when they changed
(``revoke_generation``): changing the password ends every session. (Shared workers of one
PostgreSQL journal each delete only the generation they left.) Logging out deletes the
session's row, so a replayed cookie opens nothing.

A session lives ``IDLE_SECONDS`` after it was last used and never longer than
``MAX_AGE_SECONDS`` after it was made. ``last_seen`` is written at most once every
``TOUCH_SECONDS`` per session, so reading a session costs no write on most requests.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from durability.store.base import StoreTx
from durability.store.rows import WebSessionRow

if TYPE_CHECKING:  # pragma: no cover
    from durability.journal import Journal

T = TypeVar("T")

IDLE_SECONDS = 24 * 3600.0
MAX_AGE_SECONDS = 7 * 24 * 3600.0
TOUCH_SECONDS = 60.0
#: Past this many sessions, making one drops the least recently used (a bound on the table
#: for servers without a login, where any allowed client may ask for a session).
MAX_SESSIONS = 10_000


def id_digest(session_id: str) -> str:
    """What the table stores for a cookie's session id."""
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class WebSession:
    """A live session as the web layer sees it; ``session_id`` is the cookie's value."""

    session_id: str
    authenticated: bool
    csrf_token: str
    created_at: float
    expires_at: float


class WebSessions:
    """Create, find, and revoke sessions of one credential ``generation``."""

    def __init__(
        self, journal: Journal, generation: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.journal = journal
        self.generation = generation
        self.clock = clock

    # running a transaction off the event loop ------------------------------------------
    async def _write(self, op: Callable[[StoreTx], T]) -> T:
        return await self.journal.store.write_async(op)

    async def _read(self, op: Callable[[StoreTx], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.journal.executor(), self.journal.store.read, op)

    # operations ----------------------------------------------------------------------
    async def revoke_generation(self) -> int:
        """Delete every session of this generation; how many there were."""
        generation = self.generation
        return await self._write(lambda tx: tx.web_sessions.delete(None, generation))

    async def create(self, authenticated: bool) -> WebSession:
        """A new session with a fresh id and CSRF token."""
        now = self.clock()
        session_id = secrets.token_urlsafe(32)
        row = WebSessionRow(
            id_digest=id_digest(session_id),
            generation=self.generation,
            authenticated=authenticated,
            csrf_token=secrets.token_urlsafe(32),
            created_at=now,
            last_seen=now,
            expires_at=self._expiry(now, now),
        )
        await self._write(lambda tx: tx.web_sessions.insert(row, MAX_SESSIONS))
        return WebSession(session_id, authenticated, row.csrf_token, now, row.expires_at)

    async def find(self, session_id: str) -> WebSession | None:
        """The live session with this id, or None (unknown, revoked, expired, or made under
        other credentials)."""
        if not session_id:
            return None
        digest = id_digest(session_id)
        row = await self._read(lambda tx: tx.web_sessions.get(digest))
        now = self.clock()
        if row is None or row.generation != self.generation or row.expires_at <= now:
            return None
        expires_at = row.expires_at
        if now - row.last_seen >= TOUCH_SECONDS:
            expires_at = self._expiry(row.created_at, now)
            await self._write(lambda tx: tx.web_sessions.touch(digest, now, expires_at))
        return WebSession(session_id, row.authenticated, row.csrf_token, row.created_at, expires_at)

    async def revoke(self, session_id: str) -> bool:
        """Delete the session (logout); True when there was one."""
        digest = id_digest(session_id)
        return bool(await self._write(lambda tx: tx.web_sessions.delete(digest, None)))

    async def revoke_all(self) -> int:
        return await self._write(lambda tx: tx.web_sessions.delete(None, None))

    @staticmethod
    def _expiry(created_at: float, now: float) -> float:
        return min(now + IDLE_SECONDS, created_at + MAX_AGE_SECONDS)
