-- PostgreSQL's form of migrations/0008_day_two.sql (the same step; store/migrate.go).
--
-- 0008: running postern for real (issue 15): what a key check found, and
-- what a console token may do.
--
-- check_status is the outcome of the last key check, whatever it was, so
-- that every list says what happened: 'ok' (the target accepted the key and
-- ran the recipe's read), 'rejected' (it refused the key), 'unreachable'
-- (no answer, or no SSH handshake), 'host_key_mismatch' (it presented a key
-- that is not pinned), 'unproved' (the key was accepted but the read
-- failed) or 'unchecked' (never checked). key_message keeps the details.
-- It replaces key_status of 0001, which could only say unknown, ok or
-- rejected and whose CHECK constraint SQLite cannot change in place
-- (rebuilding the table would cascade-delete its grants); key_status is no
-- longer read or written.
ALTER TABLE connections ADD COLUMN check_status TEXT COLLATE "C" NOT NULL DEFAULT 'unchecked'
    CHECK (check_status IN ('unchecked', 'ok', 'rejected', 'unreachable', 'host_key_mismatch', 'unproved'));
UPDATE connections SET check_status = key_status WHERE key_status IN ('ok', 'rejected');

-- A console token's scope: 'read' reads, 'approve' also decides approvals
-- and re-checks keys, 'admin' also changes agents, connections, grants,
-- tokens and notification channels. Tokens made before this step could
-- decide, so they become 'approve'; changes need a new 'admin' token.
ALTER TABLE console_tokens ADD COLUMN scope TEXT COLLATE "C" NOT NULL DEFAULT 'approve'
    CHECK (scope IN ('read', 'approve', 'admin'));
