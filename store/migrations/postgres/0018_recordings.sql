-- PostgreSQL's form of migrations/0018_recordings.sql (the same step; store/migrate.go).
--
-- 0018: recordings (issue 24), off by default.
--
-- connections.record is the admin's setting: 'off' (nothing is recorded),
-- 'exec' (the output of exec commands without a terminal) or 'all' (also
-- the terminal stream of sessions with a pty).
ALTER TABLE connections ADD COLUMN record TEXT COLLATE "C" NOT NULL DEFAULT 'off'
    CHECK (record IN ('off', 'exec', 'all'));

-- One row per recorded operation. sealed is the event list (time offset,
-- stream, bytes) sealed with the master key, the row's id as associated
-- data: the output of commands can hold anything the target printed.
-- audit_seq is the seq of the operation's audit row (0 when that row could
-- not be written); the audit row does not name the recording, so the audit
-- chain's rows are not touched once written. operation is the command as
-- audited (redacted). bytes_kept is what the blob holds; bytes_dropped what
-- came past the bound, counted and not kept. Rows older than the retention
-- period are deleted by serve's sweep (started_at).
CREATE TABLE recordings (
    id               TEXT COLLATE "C" PRIMARY KEY,
    audit_seq        BIGINT NOT NULL DEFAULT 0,
    agent_id         TEXT COLLATE "C" NOT NULL,
    agent_name       TEXT COLLATE "C" NOT NULL,
    connection_id    TEXT COLLATE "C" NOT NULL,
    connection_alias TEXT COLLATE "C" NOT NULL,
    operation        TEXT COLLATE "C" NOT NULL,
    mode             TEXT COLLATE "C" NOT NULL CHECK (mode IN ('exec', 'pty')),
    started_at       TEXT COLLATE "C" NOT NULL,
    duration_ms      BIGINT NOT NULL CHECK (duration_ms >= 0),
    bytes_kept       BIGINT NOT NULL CHECK (bytes_kept >= 0),
    bytes_dropped    BIGINT NOT NULL CHECK (bytes_dropped >= 0),
    sealed           BYTEA NOT NULL
);
CREATE INDEX recordings_started ON recordings(started_at);
CREATE INDEX recordings_audit_seq ON recordings(audit_seq);
