-- 0003: shared resources (durability/resources.py): a run's attachments and a chat's
-- work folder, encrypted with the Fernet key before they reach the database.
-- resource_files: one encrypted file body per keyed address (HMAC-SHA256 of the plain
-- bytes under a key derived from the resource key: equal files are stored once, and the
-- address says nothing to a reader without the key).
-- resource_snapshots: an encrypted manifest (names, sizes, modes, addresses) per capture.
CREATE TABLE resource_files (
    address     TEXT PRIMARY KEY,
    size        BIGINT NOT NULL,
    data        BYTEA NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL
);

CREATE TABLE resource_snapshots (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    context_id  TEXT NOT NULL,
    run_id      TEXT REFERENCES runs(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('attachments', 'workdir')),
    manifest    BYTEA NOT NULL,
    total_size  BIGINT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX resource_snapshots_by_context ON resource_snapshots(context_id, kind, id);
CREATE INDEX resource_snapshots_by_run ON resource_snapshots(run_id, kind, id);
