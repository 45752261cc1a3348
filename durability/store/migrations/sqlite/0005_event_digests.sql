-- 0005: every event carries the digest of its payload (SHA-256 of the payload's canonical
-- JSON, as written), so recovery refuses a damaged payload instead of using it. Rows written
-- before this schema get the digest of the payload they hold now (a0_sha256 is a function
-- the store registers for its migrations).
ALTER TABLE events ADD COLUMN digest TEXT;
UPDATE events SET digest = a0_sha256(payload);
