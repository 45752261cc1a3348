-- 0005: scheduled tasks (durability/schedules.py); mirrors SQLite's schema 6. The body is
-- the task's definition as canonical, masked JSON with its digest; revision changes only
-- with an edit of the definition; done_until and last_* are the scheduler's bookkeeping.
CREATE TABLE scheduled_tasks (
    id             TEXT PRIMARY KEY,
    revision       BIGINT NOT NULL CHECK (revision > 0),
    body           TEXT NOT NULL,
    digest         TEXT NOT NULL,
    created_at     DOUBLE PRECISION NOT NULL,
    created_by     TEXT NOT NULL,
    updated_at     DOUBLE PRECISION NOT NULL,
    updated_by     TEXT NOT NULL,
    done_until     DOUBLE PRECISION NOT NULL,
    last_slot      DOUBLE PRECISION,
    last_input_id  TEXT,
    last_run_id    TEXT,
    last_fired_at  DOUBLE PRECISION,
    last_skip      TEXT
);
CREATE INDEX scheduled_tasks_by_created ON scheduled_tasks(created_at, id);
