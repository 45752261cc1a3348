-- 0012: a sweep's candidates in order (durability/store/_tables/claims.py, CANDIDATES):
-- the active runs by their last change, so the lookup stops after the first free ones
-- instead of reading and sorting every active run.
CREATE INDEX runs_active_by_change ON runs(updated_at) WHERE status = 'active';
