-- 0008: the agent's memory (durability/memory.py), in the journal's own file. One row per
-- memory of one memory subdir (setting agent_memory_subdir): its area (main, fragments,
-- solutions, ...), its text and metadata (masked before they are stored), and its vector
-- from the embedding model named in `model` (float32, little-endian, `dim` values). The
-- vector is a plain BLOB: search uses sqlite-vec's functions on it, so the schema itself
-- needs no extension and every tool that opens the file can read it.
CREATE TABLE memories (
    id          TEXT PRIMARY KEY,
    subdir      TEXT NOT NULL,
    area        TEXT NOT NULL,
    text        TEXT NOT NULL,
    metadata    TEXT NOT NULL,
    model       TEXT NOT NULL,
    dim         INTEGER NOT NULL CHECK (dim > 0),
    vector      BLOB NOT NULL CHECK (length(vector) = 4 * dim),
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
) STRICT;
CREATE INDEX memories_by_subdir ON memories(subdir, model, area);
CREATE INDEX memories_by_time ON memories(subdir, created_at);
-- Vectors already computed, by (embedding model, SHA-256 of the text): embedding the same
-- text again costs no request. The text itself is not kept.
CREATE TABLE embedding_cache (
    model       TEXT NOT NULL,
    digest      TEXT NOT NULL,
    dim         INTEGER NOT NULL CHECK (dim > 0),
    vector      BLOB NOT NULL CHECK (length(vector) = 4 * dim),
    created_at  REAL NOT NULL,
    PRIMARY KEY (model, digest)
) STRICT, WITHOUT ROWID;
