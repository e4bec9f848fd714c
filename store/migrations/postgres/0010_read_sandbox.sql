-- PostgreSQL's form of migrations/0010_read_sandbox.sql (the same step; store/migrate.go).
--
-- 0010: the read sandbox (issue 21): whether a connection's read commands
-- run on the target with the whole filesystem read-only, and what the
-- target can do.
--
-- read_sandbox is the admin's setting: 'auto' (use what the probe found,
-- and say so when it found nothing), 'require' (refuse read commands when
-- no sandbox works on the target) or 'off' (never, for a target where it
-- breaks something), with read_sandbox_reason saying why for 'off'.
--
-- sandbox_found is what the last probe found on the target: 'bwrap',
-- 'unshare', 'none' (sandbox_message says why each mechanism failed) or
-- 'unprobed' (never probed: connections made before this step, until their
-- next check). sandbox_probed_at is when.
ALTER TABLE connections ADD COLUMN read_sandbox TEXT COLLATE "C" NOT NULL DEFAULT 'auto'
    CHECK (read_sandbox IN ('auto', 'require', 'off'));
ALTER TABLE connections ADD COLUMN read_sandbox_reason TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN sandbox_found TEXT COLLATE "C" NOT NULL DEFAULT 'unprobed'
    CHECK (sandbox_found IN ('unprobed', 'bwrap', 'unshare', 'none'));
ALTER TABLE connections ADD COLUMN sandbox_message TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN sandbox_probed_at TEXT COLLATE "C" NOT NULL DEFAULT '';
