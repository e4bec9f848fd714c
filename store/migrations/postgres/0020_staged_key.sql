-- PostgreSQL's form of migrations/0020_staged_key.sql (the same step; store/migrate.go).
--
-- 0020: staged key rotation. staged_key is the staged private key sealed
-- with the master key (NULL when none is staged), staged_public its
-- authorized_keys line, and staged_status/message/checked_at its last
-- check.
ALTER TABLE connections ADD COLUMN staged_key BYTEA;
ALTER TABLE connections ADD COLUMN staged_public TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN staged_at TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN staged_status TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN staged_message TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN staged_checked_at TEXT COLLATE "C" NOT NULL DEFAULT '';
