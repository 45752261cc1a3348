-- 0004: a checkpoint insert writes the table and one index, nothing else.
-- Without AUTOINCREMENT no sqlite_sequence row is rewritten per insert (ids still grow:
-- a new id is the largest + 1). checkpoints_by_context is gone: a chat's latest
-- checkpoint is its runs' latest, found through runs_by_context and checkpoints_by_run.
CREATE TABLE checkpoints_v4 (
    id          INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    context_id  TEXT NOT NULL,
    seq         INTEGER,
    body        TEXT NOT NULL,
    digest      TEXT NOT NULL,
    created_at  REAL NOT NULL
) STRICT;
INSERT INTO checkpoints_v4 (id, run_id, context_id, seq, body, digest, created_at)
    SELECT id, run_id, context_id, seq, body, digest, created_at FROM checkpoints;
DROP TABLE checkpoints;
ALTER TABLE checkpoints_v4 RENAME TO checkpoints;
CREATE INDEX checkpoints_by_run ON checkpoints(run_id, id);
