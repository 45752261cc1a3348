-- 0002: claims (shared workers, durability/cluster.py).
-- A claim is a lease on an active run held by one worker. Every claim takes a new
-- fencing token from one sequence, so a run's tokens only grow. The run's current token
-- is copied into runs.fence: a fenced journal write locks the run's row and compares,
-- so a takeover (which updates that row) and a late write of the old owner serialise.
-- Lease times are the database's clock (clock_timestamp()), never a worker's.
CREATE SEQUENCE fencing_tokens;

ALTER TABLE runs ADD COLUMN fence BIGINT;

CREATE TABLE claims (
    run_id      TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    worker_id   TEXT,              -- NULL once released
    token       BIGINT NOT NULL,
    claimed_at  DOUBLE PRECISION NOT NULL,
    expires_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX claims_by_worker ON claims(worker_id);
