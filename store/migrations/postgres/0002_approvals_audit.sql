-- PostgreSQL's form of migrations/0002_approvals_audit.sql (the same step; store/migrate.go).
--
-- 0002: approval requests and the hash-chained audit log.
--
-- Times are RFC 3339 text in UTC with nanoseconds (store.formatTime); ''
-- means "not yet". Package policy decides what the rows mean; this file only
-- keeps them.

-- An approval request binds an admin's decision to one exact operation. The
-- binding is operation_sha256, the SHA-256 of the exact command text (or SFTP
-- method and paths) the agent sent; a retry must hash to the same value to
-- use the approval. operation holds that text with secrets redacted: it is
-- what an admin reads before deciding, and a password typed into a command
-- is not kept at rest just to be shown.
CREATE TABLE approvals (
    id                TEXT COLLATE "C" PRIMARY KEY,
    agent_id          TEXT COLLATE "C" NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    connection_id     TEXT COLLATE "C" NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    class             TEXT COLLATE "C" NOT NULL CHECK (class IN ('read', 'write', 'destructive')),
    kind              TEXT COLLATE "C" NOT NULL CHECK (kind IN ('exec', 'sftp')),
    operation         TEXT COLLATE "C" NOT NULL,
    operation_sha256  TEXT COLLATE "C" NOT NULL CHECK (length(operation_sha256) = 64),
    -- 2 for a destructive operation on a production connection (two
    -- different admins), 1 otherwise.
    approvals_needed  BIGINT NOT NULL CHECK (approvals_needed IN (1, 2)),
    status            TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    -- The first of two approvals, while the second is awaited.
    first_approver    TEXT COLLATE "C" NOT NULL DEFAULT '',
    first_approved_at TEXT COLLATE "C" NOT NULL DEFAULT '',
    -- Who moved the request out of 'pending' (the second approver when two
    -- were needed), when, and for a denial the reason given.
    decided_by        TEXT COLLATE "C" NOT NULL DEFAULT '',
    decided_at        TEXT COLLATE "C" NOT NULL DEFAULT '',
    reason            TEXT COLLATE "C" NOT NULL DEFAULT '',
    expires_at        TEXT COLLATE "C" NOT NULL,
    -- Set once, when an approved request lets its operation through.
    consumed_at       TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at        TEXT COLLATE "C" NOT NULL,
    modified_at       TEXT COLLATE "C" NOT NULL,
    CHECK (consumed_at = '' OR status = 'approved')
);
-- A retry looks for an open request for the same agent, connection and text.
CREATE INDEX approvals_operation ON approvals(agent_id, connection_id, operation_sha256);
CREATE INDEX approvals_status ON approvals(status, created_at);

-- One row per decision, appended and never changed. seq numbers the rows
-- 1, 2, 3, ... without gaps and is part of the hashed data, so a deleted or
-- reordered row breaks the chain as surely as an edited one. hash is
-- SHA-256 over policy's canonical encoding of the row and the previous row's
-- hash (see policy/chain.go). Agents and connections are copied by id and
-- name, not referenced, because removing an agent must not touch its history.
CREATE TABLE audit (
    seq              BIGINT PRIMARY KEY,
    time             TEXT COLLATE "C" NOT NULL,
    agent_id         TEXT COLLATE "C" NOT NULL,
    agent_name       TEXT COLLATE "C" NOT NULL,
    connection_id    TEXT COLLATE "C" NOT NULL,
    connection_alias TEXT COLLATE "C" NOT NULL,
    class            TEXT COLLATE "C" NOT NULL,
    kind             TEXT COLLATE "C" NOT NULL,
    decision         TEXT COLLATE "C" NOT NULL,
    reason           TEXT COLLATE "C" NOT NULL,
    approval_id      TEXT COLLATE "C" NOT NULL,
    -- Admin names, comma-separated, in the order they approved or denied.
    deciders         TEXT COLLATE "C" NOT NULL,
    -- The operation with secrets redacted; never its output.
    operation        TEXT COLLATE "C" NOT NULL,
    -- NULL when the operation did not run or ended without a status.
    exit_status      BIGINT,
    duration_ns      BIGINT NOT NULL,
    bytes_in         BIGINT NOT NULL,
    bytes_out        BIGINT NOT NULL,
    hash             BYTEA NOT NULL
);
CREATE INDEX audit_time ON audit(time);
