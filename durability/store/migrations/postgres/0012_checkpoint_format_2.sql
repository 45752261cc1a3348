-- 0012: checkpoint format 2 (#24); see the SQLite migration of the same number.
COMMENT ON COLUMN checkpoints.body IS 'checkpoint body, format 1 or 2 (durability/checkpoints.py)';
