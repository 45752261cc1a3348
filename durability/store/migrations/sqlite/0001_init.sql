-- 0001: the journal's tables. Every JSON column holds canonical, masked JSON text.

CREATE TABLE contexts (
    id          TEXT PRIMARY KEY,
    created_at  REAL NOT NULL
) STRICT;

CREATE TABLE runs (
    id                 TEXT PRIMARY KEY,
    context_id         TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,
    input_id           TEXT NOT NULL,
    input_digest       TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN
                           ('active', 'needs_attention', 'completed', 'stopped', 'failed')),
    version            INTEGER NOT NULL,
    reason             TEXT,
    reason_detail      TEXT,
    recovery_attempts  INTEGER NOT NULL DEFAULT 0,
    created_at         REAL NOT NULL,
    updated_at         REAL NOT NULL
) STRICT;
-- At most one open (active or held) run per chat, enforced by the database as well.
CREATE UNIQUE INDEX runs_one_open_per_context ON runs(context_id)
    WHERE status IN ('active', 'needs_attention');
CREATE INDEX runs_by_status ON runs(status, updated_at);
CREATE INDEX runs_by_context ON runs(context_id, created_at);

-- Idempotency records: an input id stays bound to its run until both are removed.
CREATE TABLE inputs (
    input_id    TEXT PRIMARY KEY,
    digest      TEXT NOT NULL,
    context_id  TEXT NOT NULL,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('run', 'intervention')),
    created_at  REAL NOT NULL
) STRICT;
CREATE INDEX inputs_by_run ON inputs(run_id);

CREATE TABLE calls (
    id             TEXT PRIMARY KEY,
    run_id         TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    agent_no       INTEGER NOT NULL,
    seq            INTEGER NOT NULL,
    attempt        INTEGER NOT NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('model', 'tool', 'subordinate')),
    name           TEXT NOT NULL,
    args           TEXT NOT NULL,
    policy         TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN
                       ('open', 'completed', 'failed', 'abandoned', 'superseded', 'not_completed')),
    result         TEXT,
    result_blob    TEXT,
    result_digest  TEXT,
    created_at     REAL NOT NULL,
    closed_at      REAL,
    UNIQUE (run_id, agent_no, seq, attempt)
) STRICT;
CREATE INDEX calls_open ON calls(run_id) WHERE state = 'open';

-- Content-addressed bytes (history messages, history nodes, large results), stored once.
CREATE TABLE blobs (
    hash        TEXT PRIMARY KEY,
    size        INTEGER NOT NULL,
    data        BLOB NOT NULL,
    created_at  REAL NOT NULL
) STRICT;

CREATE TABLE checkpoints (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    context_id  TEXT NOT NULL,
    seq         INTEGER,
    body        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    created_at  REAL NOT NULL
) STRICT;
CREATE INDEX checkpoints_by_run ON checkpoints(run_id, id);
CREATE INDEX checkpoints_by_context ON checkpoints(context_id, id);

CREATE TABLE documents (
    context_id  TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    revision    INTEGER NOT NULL,
    body        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    updated_at  REAL NOT NULL,
    updated_by  TEXT NOT NULL,
    PRIMARY KEY (context_id, kind)
) STRICT;

CREATE TABLE conflicts (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    context_id         TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,
    kind               TEXT NOT NULL,
    expected_revision  INTEGER NOT NULL,
    actual_revision    INTEGER NOT NULL,
    proposed           TEXT NOT NULL,
    actor              TEXT NOT NULL,
    created_at         REAL NOT NULL,
    resolved_at        REAL,
    resolution         TEXT,
    resolved_by        TEXT
) STRICT;
CREATE INDEX conflicts_by_context ON conflicts(context_id, id);

CREATE TABLE decisions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    call_id     TEXT,
    decision    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    actor       TEXT NOT NULL,
    note        TEXT,
    created_at  REAL NOT NULL,
    UNIQUE (run_id, version)
) STRICT;

CREATE TABLE retry_grants (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    attempts    INTEGER NOT NULL CHECK (attempts > 0),
    remaining   INTEGER NOT NULL CHECK (remaining >= 0),
    actor       TEXT NOT NULL,
    created_at  REAL NOT NULL
) STRICT;
CREATE INDEX retry_grants_by_run ON retry_grants(run_id, id);

CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    context_id  TEXT NOT NULL,
    run_id      TEXT REFERENCES runs(id) ON DELETE CASCADE,
    type        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    created_at  REAL NOT NULL
) STRICT;
CREATE INDEX events_by_context ON events(context_id, id);
CREATE INDEX events_by_run ON events(run_id, id);
