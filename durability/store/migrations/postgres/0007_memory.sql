-- 0007: the agent's memory and the embedding cache (durability/memory.py); mirrors SQLite's
-- schema 8. Vectors are float32 little-endian bytes (`dim` values), searched exactly on the
-- worker (numpy) unless the server has pgvector.
CREATE TABLE memories (
    id          TEXT PRIMARY KEY,
    subdir      TEXT NOT NULL,
    area        TEXT NOT NULL,
    text        TEXT NOT NULL,
    metadata    TEXT NOT NULL,
    model       TEXT NOT NULL,
    dim         INTEGER NOT NULL CHECK (dim > 0),
    vector      BYTEA NOT NULL CHECK (octet_length(vector) = 4 * dim),
    created_at  DOUBLE PRECISION NOT NULL,
    updated_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX memories_by_subdir ON memories(subdir, model, area);
CREATE INDEX memories_by_time ON memories(subdir, created_at);
CREATE TABLE embedding_cache (
    model       TEXT NOT NULL,
    digest      TEXT NOT NULL,
    dim         INTEGER NOT NULL CHECK (dim > 0),
    vector      BYTEA NOT NULL CHECK (octet_length(vector) = 4 * dim),
    created_at  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (model, digest)
);
