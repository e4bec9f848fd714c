-- PostgreSQL's form of migrations/0004_inflight.sql (the same step; store/migrate.go).
--
-- 0004: the journal of operations that were let through and have not ended.
--
-- An allowed operation's audit row is written when it ends, because the row
-- carries its exit status, duration and byte counts, and rows are never
-- changed. Its journal row is written before it runs, and removed in the
-- same transaction that appends the audit row. A journal row left behind
-- means postern stopped while the operation ran: the next `postern serve`
-- appends it to the audit log as failed, so that nothing that reached a
-- target goes unrecorded. Writing the journal row is also the proof that
-- the database takes writes at all; if it cannot be written, the operation
-- is refused.
CREATE TABLE inflight (
    id         TEXT COLLATE "C" PRIMARY KEY,
    -- The audit row as known when the operation started, as JSON: the
    -- operation is already redacted, like the audit log's.
    row        TEXT COLLATE "C" NOT NULL,
    created_at TEXT COLLATE "C" NOT NULL
);
