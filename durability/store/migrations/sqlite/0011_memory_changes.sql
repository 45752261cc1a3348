-- 0010: what lets a process keep the memories' vectors in memory and know when they changed
-- (durability/memory/_matrix.py, docs/memory.md). `seq` numbers the memories in the order
-- they were stored: an INTEGER PRIMARY KEY, so it is the rowid itself and VACUUM keeps it;
-- a new memory always gets a larger one than every memory already there, so "seq > last
-- seen" finds exactly the memories saved since, unless the newest memories were deleted
-- (their numbers are given again). memory_changes counts the updates that move a vector
-- (of its seq, id, subdir, area, model, dimension or vector: a searcher whose count
-- differs reloads) and the deletes, with the highest seq ever deleted (a searcher masks
-- the memories gone, or reloads when one at or above its newest went). A save bumps
-- nothing: it writes no extra page.
CREATE TABLE memories_new (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
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
INSERT INTO memories_new (id, subdir, area, text, metadata, model, dim, vector, created_at,
                          updated_at)
    SELECT id, subdir, area, text, metadata, model, dim, vector, created_at, updated_at
    FROM memories ORDER BY rowid;
DROP TABLE memories;
ALTER TABLE memories_new RENAME TO memories;
CREATE INDEX memories_by_subdir ON memories(subdir, model, area);
CREATE INDEX memories_by_time ON memories(subdir, created_at);
CREATE TABLE memory_changes (
    one         INTEGER PRIMARY KEY CHECK (one = 1),
    moves       INTEGER NOT NULL,
    deletes     INTEGER NOT NULL,
    top_deleted INTEGER NOT NULL
) STRICT;
INSERT INTO memory_changes (one, moves, deletes, top_deleted) VALUES (1, 0, 0, 0);
CREATE TRIGGER memories_deleted AFTER DELETE ON memories
BEGIN
    UPDATE memory_changes SET deletes = deletes + 1, top_deleted = max(top_deleted, OLD.seq)
    WHERE one = 1;
END;
CREATE TRIGGER memories_moved AFTER UPDATE OF seq, id, subdir, area, model, dim, vector
ON memories
BEGIN
    UPDATE memory_changes SET moves = moves + 1 WHERE one = 1;
END;
