-- 0004: every event carries the digest of its payload (SHA-256 of the payload's canonical
-- JSON, as written), so recovery refuses a damaged payload instead of using it; mirrors
-- SQLite's schema 5. Rows written before get the digest of the payload they hold now.
ALTER TABLE events ADD COLUMN digest TEXT;
UPDATE events SET digest = encode(sha256(convert_to(payload, 'UTF8')), 'hex');
