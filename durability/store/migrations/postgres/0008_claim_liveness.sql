-- 0008: a claim names its holder's liveness lock (durability/liveness.py). A worker holds
-- a session-level advisory lock keyed by its namespace and worker id on a connection of
-- its own for its whole life; PostgreSQL frees the lock when that session ends (the
-- process died, or its backend was terminated). A claim whose alive_key lock nobody holds
-- is over before its lease: its holder is gone. NULL: the holder held no such lock when it
-- claimed (an older worker, or its lock was not free): the lease alone decides.
ALTER TABLE claims ADD COLUMN alive_key BIGINT;
