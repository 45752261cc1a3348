-- 0006: browser sessions of the web UI (durability/web_sessions.py); mirrors SQLite's
-- schema 7. Only the SHA-256 of the cookie's random id is stored; generation is the
-- fingerprint of the login credentials the session was made under.
CREATE TABLE web_sessions (
    id_digest      TEXT PRIMARY KEY,
    generation     TEXT NOT NULL,
    authenticated  SMALLINT NOT NULL CHECK (authenticated IN (0, 1)),
    csrf_token     TEXT NOT NULL,
    created_at     DOUBLE PRECISION NOT NULL,
    last_seen      DOUBLE PRECISION NOT NULL,
    expires_at     DOUBLE PRECISION NOT NULL
);
CREATE INDEX web_sessions_by_expiry ON web_sessions(expires_at);
CREATE INDEX web_sessions_by_last_seen ON web_sessions(last_seen);
