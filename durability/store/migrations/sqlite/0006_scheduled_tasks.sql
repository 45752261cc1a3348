-- 0006: scheduled tasks (durability/schedules.py). A task's definition (name, kind, prompt,
-- schedule or plan, timezone, chat, enabled) is one canonical, masked JSON body with its
-- digest; ``revision`` changes only when a person or an agent edits the definition. The
-- firing columns are the scheduler's bookkeeping and never change the revision:
-- done_until: every slot at or before this instant (seconds since the epoch) is handled;
-- last_*: the latest firing (its slot, input id and run); last_skip: the latest slot that
-- was skipped and why (JSON).
CREATE TABLE scheduled_tasks (
    id             TEXT PRIMARY KEY,
    revision       INTEGER NOT NULL CHECK (revision > 0),
    body           TEXT NOT NULL,
    digest         TEXT NOT NULL,
    created_at     REAL NOT NULL,
    created_by     TEXT NOT NULL,
    updated_at     REAL NOT NULL,
    updated_by     TEXT NOT NULL,
    done_until     REAL NOT NULL,
    last_slot      REAL,
    last_input_id  TEXT,
    last_run_id    TEXT,
    last_fired_at  REAL,
    last_skip      TEXT
) STRICT;
CREATE INDEX scheduled_tasks_by_created ON scheduled_tasks(created_at, id);
