-- 0002: a version bump (every intent, result and checkpoint) rewrites only the run's row.
-- runs_by_status no longer carries updated_at, so changing updated_at touches no index;
-- the store updates only version and updated_at when nothing else of the run changed.
DROP INDEX runs_by_status;
CREATE INDEX runs_by_status ON runs(status);
