-- 0001: the journal's tables, as SQLite has them at its schema 4 (0001-0004).
-- Every JSON column holds canonical, masked JSON text (TEXT, never jsonb: digests are
-- computed over the exact text). Times are Unix seconds as double precision.
-- Differences from SQLite: `no` identity columns give runs and calls the insertion order
-- SQLite's rowid gives; ids are identity columns.

CREATE TABLE contexts (
    id          TEXT PRIMARY KEY,
    created_at  DOUBLE PRECISION NOT NULL
);

CREATE TABLE runs (
    id                 TEXT PRIMARY KEY,
    no                 BIGINT GENERATED ALWAYS AS IDENTITY,
    context_id         TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,
    input_id           TEXT NOT NULL,
    input_digest       TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN
                           ('active', 'needs_attention', 'completed', 'stopped', 'failed')),
    version            BIGINT NOT NULL,
    reason             TEXT,
    reason_detail      TEXT,
    recovery_attempts  BIGINT NOT NULL DEFAULT 0,
    created_at         DOUBLE PRECISION NOT NULL,
    updated_at         DOUBLE PRECISION NOT NULL
);
-- At most one open (active or held) run per chat, enforced by the database as well.
CREATE UNIQUE INDEX runs_one_open_per_context ON runs(context_id)
    WHERE status IN ('active', 'needs_attention');
CREATE INDEX runs_by_status ON runs(status);
CREATE INDEX runs_by_context ON runs(context_id, created_at);

CREATE TABLE inputs (
    input_id    TEXT PRIMARY KEY,
    digest      TEXT NOT NULL,
    context_id  TEXT NOT NULL,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('run', 'intervention')),
    created_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX inputs_by_run ON inputs(run_id);

CREATE TABLE calls (
    id             TEXT PRIMARY KEY,
    no             BIGINT GENERATED ALWAYS AS IDENTITY,
    run_id         TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    agent_no       BIGINT NOT NULL,
    seq            BIGINT NOT NULL,
    attempt        BIGINT NOT NULL,
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
    created_at     DOUBLE PRECISION NOT NULL,
    closed_at      DOUBLE PRECISION,
    UNIQUE (run_id, agent_no, seq, attempt)
);

CREATE TABLE blobs (
    hash        TEXT PRIMARY KEY,
    size        BIGINT NOT NULL,
    data        BYTEA NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL
);

CREATE TABLE checkpoints (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    context_id  TEXT NOT NULL,
    seq         BIGINT,
    body        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX checkpoints_by_run ON checkpoints(run_id, id);

CREATE TABLE documents (
    context_id  TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    revision    BIGINT NOT NULL,
    body        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    updated_at  DOUBLE PRECISION NOT NULL,
    updated_by  TEXT NOT NULL,
    PRIMARY KEY (context_id, kind)
);

CREATE TABLE conflicts (
    id                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    context_id         TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,
    kind               TEXT NOT NULL,
    expected_revision  BIGINT NOT NULL,
    actual_revision    BIGINT NOT NULL,
    proposed           TEXT NOT NULL,
    actor              TEXT NOT NULL,
    created_at         DOUBLE PRECISION NOT NULL,
    resolved_at        DOUBLE PRECISION,
    resolution         TEXT,
    resolved_by        TEXT
);
CREATE INDEX conflicts_by_context ON conflicts(context_id, id);

CREATE TABLE decisions (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    call_id     TEXT,
    decision    TEXT NOT NULL,
    version     BIGINT NOT NULL,
    actor       TEXT NOT NULL,
    note        TEXT,
    created_at  DOUBLE PRECISION NOT NULL,
    UNIQUE (run_id, version)
);

CREATE TABLE retry_grants (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    attempts    BIGINT NOT NULL CHECK (attempts > 0),
    remaining   BIGINT NOT NULL CHECK (remaining >= 0),
    actor       TEXT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX retry_grants_by_run ON retry_grants(run_id, id);

-- Event ids come from a sequence: with concurrent writers they are unique and grow, but
-- a later id can commit before an earlier one (never use after_id as a live cursor
-- across concurrent runs).
CREATE TABLE events (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    context_id  TEXT NOT NULL,
    run_id      TEXT REFERENCES runs(id) ON DELETE CASCADE,
    type        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX events_by_context ON events(context_id, id);
CREATE INDEX events_by_run ON events(run_id, id);
