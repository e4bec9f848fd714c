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
    id                TEXT PRIMARY KEY,
    agent_id          TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    connection_id     TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    class             TEXT NOT NULL CHECK (class IN ('read', 'write', 'destructive')),
    kind              TEXT NOT NULL CHECK (kind IN ('exec', 'sftp')),
    operation         TEXT NOT NULL,
    operation_sha256  TEXT NOT NULL CHECK (length(operation_sha256) = 64),
    -- 2 for a destructive operation on a production connection (two
    -- different admins), 1 otherwise.
    approvals_needed  INTEGER NOT NULL CHECK (approvals_needed IN (1, 2)),
    status            TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    -- The first of two approvals, while the second is awaited.
    first_approver    TEXT NOT NULL DEFAULT '',
    first_approved_at TEXT NOT NULL DEFAULT '',
    -- Who moved the request out of 'pending' (the second approver when two
    -- were needed), when, and for a denial the reason given.
    decided_by        TEXT NOT NULL DEFAULT '',
    decided_at        TEXT NOT NULL DEFAULT '',
    reason            TEXT NOT NULL DEFAULT '',
    expires_at        TEXT NOT NULL,
    -- Set once, when an approved request lets its operation through.
    consumed_at       TEXT NOT NULL DEFAULT '',
    created_at        TEXT NOT NULL,
    modified_at       TEXT NOT NULL,
    CHECK (consumed_at = '' OR status = 'approved')
) STRICT;
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
    seq              INTEGER PRIMARY KEY,
    time             TEXT NOT NULL,
    agent_id         TEXT NOT NULL,
    agent_name       TEXT NOT NULL,
    connection_id    TEXT NOT NULL,
    connection_alias TEXT NOT NULL,
    class            TEXT NOT NULL,
    kind             TEXT NOT NULL,
    decision         TEXT NOT NULL,
    reason           TEXT NOT NULL,
    approval_id      TEXT NOT NULL,
    -- Admin names, comma-separated, in the order they approved or denied.
    deciders         TEXT NOT NULL,
    -- The operation with secrets redacted; never its output.
    operation        TEXT NOT NULL,
    -- NULL when the operation did not run or ended without a status.
    exit_status      INTEGER,
    duration_ns      INTEGER NOT NULL,
    bytes_in         INTEGER NOT NULL,
    bytes_out        INTEGER NOT NULL,
    hash             BLOB NOT NULL
) STRICT;
CREATE INDEX audit_time ON audit(time);
