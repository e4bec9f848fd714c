-- PostgreSQL's form of migrations/0005_approval_identity_scopes.sql (the same step; store/migrate.go).
--
-- 0005: approvals that mean what they say.
--
-- Who decided, by identity. The two-person rule of a production destructive
-- operation compares these admin ids, never names: two console tokens of one
-- admin, or "alice" and "ALICE", are one person. The name columns of 0002
-- (first_approver, decided_by) keep the admin's name for display and audit.
ALTER TABLE approvals ADD COLUMN first_approver_id TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN decided_by_id TEXT COLLATE "C" NOT NULL DEFAULT '';

-- What the agent said the operation is for (POSTERN_REASON, redacted like the
-- operation and length-limited) and where it connected from: shown to the
-- admin who decides, never sent to the target.
ALTER TABLE approvals ADD COLUMN agent_reason TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN source_addr TEXT COLLATE "C" NOT NULL DEFAULT '';

-- The size of an approval. 'request' lets exactly the one operation through
-- (the default, and the only size for a production destructive operation).
-- 'operation' also lets the same exact operation of the same agent on the
-- same connection through, and 'class' any operation of its class there,
-- until scope_expires_at unless revoked first. The approval itself is still
-- consumed once, by the operation that asked.
ALTER TABLE approvals ADD COLUMN scope TEXT COLLATE "C" NOT NULL DEFAULT 'request'
    CHECK (scope IN ('request', 'operation', 'class'));
ALTER TABLE approvals ADD COLUMN scope_expires_at TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN scope_revoked_at TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN scope_revoked_by TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX approvals_scope ON approvals(agent_id, connection_id, scope_expires_at)
    WHERE scope != 'request';

-- A console token belongs to an admin, and its decisions are that admin's.
-- A token made before this step has none and cannot decide until it is
-- assigned (postern token assign NAME --admin ADMIN).
ALTER TABLE console_tokens ADD COLUMN admin_id TEXT COLLATE "C" REFERENCES admins(id) ON DELETE CASCADE;
