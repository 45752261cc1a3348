-- 0013: the hot path's writes as server-side functions (#24, PostgreSQL only; SQLite has
-- no counterpart). Each takes the write's fence (a run id, or a call id whose run is
-- meant; both NULL for an unfenced write or when the fence was read already), locks that
-- run's row and reads its token, asks for the transaction's id, then writes; one prepared
-- statement answers all three. Nothing here decides whether the fence holds: the worker
-- verifies the token it gets back before COMMIT, and a refused fence rolls the whole
-- transaction back (durability/store/postgres.py).

CREATE FUNCTION a0_fence(fence_run TEXT, fence_call TEXT, OUT fence_run_id TEXT,
                         OUT fence_token BIGINT)
LANGUAGE plpgsql AS $$
BEGIN
    IF fence_run IS NOT NULL THEN
        SELECT r.id, r.fence INTO fence_run_id, fence_token FROM runs r
            WHERE r.id = fence_run FOR NO KEY UPDATE;
    ELSIF fence_call IS NOT NULL THEN
        SELECT r.id, r.fence INTO fence_run_id, fence_token FROM runs r
            JOIN calls c ON c.run_id = r.id WHERE c.id = fence_call FOR NO KEY UPDATE OF r;
    END IF;
END $$;

-- Attempt 1 of a call position, when its run is active and the position is free: the
-- run's version bumped and the call inserted (``inserted``), else nothing written.
CREATE FUNCTION a0_intent_if_free(
    fence_run TEXT, fence_call TEXT,
    c_id TEXT, c_run_id TEXT, c_agent_no BIGINT, c_seq BIGINT, c_attempt BIGINT,
    c_kind TEXT, c_name TEXT, c_args TEXT, c_policy TEXT, c_fingerprint TEXT, c_state TEXT,
    c_result TEXT, c_result_blob TEXT, c_result_digest TEXT,
    c_created_at DOUBLE PRECISION, c_closed_at DOUBLE PRECISION,
    OUT tx_id TEXT, OUT fence_run_id TEXT, OUT fence_token BIGINT, OUT inserted BOOLEAN)
LANGUAGE plpgsql AS $$
BEGIN
    tx_id := pg_current_xact_id()::text;
    SELECT f.fence_run_id, f.fence_token INTO fence_run_id, fence_token
        FROM a0_fence(fence_run, fence_call) f;
    UPDATE runs SET version = version + 1, updated_at = c_created_at
        WHERE id = c_run_id AND status = 'active' AND NOT EXISTS (SELECT 1 FROM calls
            WHERE run_id = c_run_id AND agent_no = c_agent_no AND seq = c_seq);
    inserted := FOUND;
    IF inserted THEN
        INSERT INTO calls (id, run_id, agent_no, seq, attempt, kind, name, args, policy,
                           fingerprint, state, result, result_blob, result_digest,
                           created_at, closed_at)
        VALUES (c_id, c_run_id, c_agent_no, c_seq, c_attempt, c_kind, c_name, c_args,
                c_policy, c_fingerprint, c_state, c_result, c_result_blob, c_result_digest,
                c_created_at, c_closed_at);
    END IF;
END $$;

-- The result of an open call of an active run (one that fits its column), and the run's
-- version bumped: the closed call's columns but its result, and the run's chat; NULLs
-- (nothing written) when the call is not open or its run not active.
CREATE FUNCTION a0_close_open(
    fence_run TEXT, fence_call TEXT,
    c_state TEXT, c_result TEXT, c_digest TEXT, c_now DOUBLE PRECISION, c_call_id TEXT,
    OUT tx_id TEXT, OUT fence_run_id TEXT, OUT fence_token BIGINT,
    OUT o_id TEXT, OUT o_run_id TEXT, OUT o_agent_no BIGINT, OUT o_seq BIGINT,
    OUT o_attempt BIGINT, OUT o_kind TEXT, OUT o_name TEXT, OUT o_args TEXT,
    OUT o_policy TEXT, OUT o_fingerprint TEXT, OUT o_state TEXT, OUT o_result_digest TEXT,
    OUT o_created_at DOUBLE PRECISION, OUT o_closed_at DOUBLE PRECISION,
    OUT o_context_id TEXT)
LANGUAGE plpgsql AS $$
BEGIN
    tx_id := pg_current_xact_id()::text;
    SELECT f.fence_run_id, f.fence_token INTO fence_run_id, fence_token
        FROM a0_fence(fence_run, fence_call) f;
    UPDATE calls c SET state = c_state, result = c_result, result_blob = NULL,
            result_digest = c_digest, closed_at = c_now
        WHERE c.id = c_call_id AND c.state = 'open' AND EXISTS (SELECT 1 FROM runs
            WHERE runs.id = c.run_id AND runs.status = 'active')
        RETURNING c.id, c.run_id, c.agent_no, c.seq, c.attempt, c.kind, c.name, c.args,
            c.policy, c.fingerprint, c.state, c.result_digest, c.created_at, c.closed_at
        INTO o_id, o_run_id, o_agent_no, o_seq, o_attempt, o_kind, o_name, o_args,
            o_policy, o_fingerprint, o_state, o_result_digest, o_created_at, o_closed_at;
    IF FOUND THEN
        UPDATE runs SET version = version + 1, updated_at = c_now WHERE id = o_run_id
            RETURNING context_id INTO o_context_id;
    END IF;
END $$;
