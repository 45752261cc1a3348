-- 0003: drop calls_open. Every intent inserted into it and every result deleted from it
-- (one more page per commit); open calls are looked up per run, through the
-- (run_id, agent_no, seq, attempt) index, among that run's calls.
DROP INDEX calls_open;
