-- 0009: a chat's browser profile (browser_agent's cookies and local storage) is a shared
-- resource like its work folder: stored encrypted, restored on the worker that takes a
-- run over (docs/browser.md).
ALTER TABLE resource_snapshots DROP CONSTRAINT resource_snapshots_kind_check;
ALTER TABLE resource_snapshots ADD CONSTRAINT resource_snapshots_kind_check
    CHECK (kind IN ('attachments', 'workdir', 'browser_profile'));
