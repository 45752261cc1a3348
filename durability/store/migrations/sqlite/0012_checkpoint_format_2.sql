-- 0012: checkpoint format 2 (#24): a checkpoint row holds its history nodes inline
-- (durability/checkpoints.py). No table changes; the number marks that this journal may
-- hold format 2 checkpoints, so a version that cannot read them refuses to open it
-- (`schema_too_new`) instead of reporting its checkpoints as corrupt.
SELECT 1;
