-- 0009: knowledge import and the embedding models of stored memories (docs/memory.md).
-- knowledge_files: one row per imported knowledge file of one memory subdir: its path
-- (relative to usr/), the SHA-256 of its bytes when it was imported, and the ids of the
-- memories (chunks) made from it. A file whose digest changed has its chunks replaced, a
-- removed file has them deleted, each file in one transaction with its row here.
CREATE TABLE knowledge_files (
    subdir      TEXT NOT NULL,
    path        TEXT NOT NULL,
    area        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    ids         TEXT NOT NULL,
    imported_at REAL NOT NULL,
    PRIMARY KEY (subdir, path)
) STRICT, WITHOUT ROWID;
-- memory_models: how to reach each embedding model that made stored vectors (provider,
-- name, api_base, kwargs; never a key), so a query can still be embedded with the old
-- model while the memories are re-embedded with a new one in the background.
CREATE TABLE memory_models (
    model       TEXT PRIMARY KEY,
    config      TEXT NOT NULL,
    updated_at  REAL NOT NULL
) STRICT, WITHOUT ROWID;
