-- 0013: the queue of runs nobody ever claimed (#24, claims that scale). A run's fence is
-- NULL until its first claim (durability/store/_tables/claims.py), so the active runs
-- with no fence are the ones a sweep may take without asking whose claim is held: this
-- index hands them over in admission order, a few at a time, without reading the other
-- active runs. Its key (`no`) never changes and a step changes neither `status` (already
-- indexed) nor `fence`, so a step's update of its run stays a HOT update; a claim, which
-- sets the fence, is not one.
CREATE INDEX runs_unclaimed ON runs(no) WHERE status = 'active' AND fence IS NULL;
