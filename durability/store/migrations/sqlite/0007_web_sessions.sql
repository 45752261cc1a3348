-- 0007: browser sessions of the web UI (durability/web_sessions.py). The cookie holds a
-- random id; only its SHA-256 is stored (id_digest), so a copy of the database opens no
-- session. generation: the login credentials the session was made under (a fingerprint);
-- a session of another generation is refused, and start-up deletes those. expires_at is
-- the idle limit, moved forward as the session is used.
CREATE TABLE web_sessions (
    id_digest      TEXT PRIMARY KEY,
    generation     TEXT NOT NULL,
    authenticated  INTEGER NOT NULL CHECK (authenticated IN (0, 1)),
    csrf_token     TEXT NOT NULL,
    created_at     REAL NOT NULL,
    last_seen      REAL NOT NULL,
    expires_at     REAL NOT NULL
) STRICT;
CREATE INDEX web_sessions_by_expiry ON web_sessions(expires_at);
CREATE INDEX web_sessions_by_last_seen ON web_sessions(last_seen);
