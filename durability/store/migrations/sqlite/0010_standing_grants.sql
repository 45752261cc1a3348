-- 0009: standing retry grants (#23). A person authorises in advance N automatic retries of
-- interrupted or failed model calls, per run, for every run of a chat, a profile or a
-- scheduled task (scope + target: the chat's id, the profile's name, the task's id). The
-- newest grant of a scope and target is the one in force (attempts 0 withdraws it). Every use
-- is recorded against the run and the call it retried, so each run shows the grant it used.
CREATE TABLE standing_grants (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    scope       TEXT NOT NULL CHECK (scope IN ('chat', 'profile', 'task')),
    target      TEXT NOT NULL,
    attempts    INTEGER NOT NULL CHECK (attempts >= 0),
    actor       TEXT NOT NULL,
    note        TEXT,
    created_at  REAL NOT NULL
) STRICT;
CREATE INDEX standing_grants_by_target ON standing_grants(scope, target, id);
CREATE TABLE standing_grant_uses (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    grant_id    INTEGER NOT NULL REFERENCES standing_grants(id) ON DELETE CASCADE,
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    call_id     TEXT NOT NULL,
    created_at  REAL NOT NULL
) STRICT;
CREATE INDEX standing_grant_uses_by_run ON standing_grant_uses(run_id, grant_id);
