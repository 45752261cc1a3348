-- 0009: standing retry grants (#23); see the SQLite migration of the same number.
CREATE TABLE standing_grants (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope       TEXT NOT NULL CHECK (scope IN ('chat', 'profile', 'task')),
    target      TEXT NOT NULL,
    attempts    BIGINT NOT NULL CHECK (attempts >= 0),
    actor       TEXT NOT NULL,
    note        TEXT,
    created_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX standing_grants_by_target ON standing_grants(scope, target, id);
CREATE TABLE standing_grant_uses (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    grant_id    BIGINT NOT NULL REFERENCES standing_grants(id) ON DELETE CASCADE,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    call_id     TEXT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX standing_grant_uses_by_run ON standing_grant_uses(run_id, grant_id);
