-- 0009: knowledge import and the embedding models of stored memories; mirrors SQLite's
-- schema 9 (durability/store/migrations/sqlite/0009_knowledge.sql says what each holds).
CREATE TABLE knowledge_files (
    subdir      TEXT NOT NULL,
    path        TEXT NOT NULL,
    area        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    ids         TEXT NOT NULL,
    imported_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (subdir, path)
);
CREATE TABLE memory_models (
    model       TEXT PRIMARY KEY,
    config      TEXT NOT NULL,
    updated_at  DOUBLE PRECISION NOT NULL
);
