-- PostgreSQL's form of migrations/0015_audit_session.sql (the same step; store/migrate.go).
--
-- 0015: every audit row names the agent's SSH connection it came from
-- (session_id, "ses_..." made when the connection is authenticated; ""
-- for rows no connection wrote: an admin's change, a recovered journal
-- row of a build before this step). One connection of an OpenSSH
-- ControlMaster carries many commands; the id groups them.
--
-- The id is inside the hash chain from this step on: chain version 3
-- (policy/chain.go). Rows keep their version; a version 1 or 2 row with a
-- session id does not verify.
--
-- The audit page and GET /v1/audit read a page of rows newest first by
-- seq under a filter; the indexes below let a filter on a session, an
-- agent or a connection read only its own rows in seq order.
ALTER TABLE audit DROP CONSTRAINT audit_chain_version_check;
ALTER TABLE audit ADD CONSTRAINT audit_chain_version_check CHECK (chain_version IN (1, 2, 3));
ALTER TABLE audit ADD COLUMN session_id TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX audit_session ON audit(session_id, seq);
CREATE INDEX audit_agent ON audit(agent_name, seq);
CREATE INDEX audit_agent_id ON audit(agent_id, seq);
CREATE INDEX audit_connection ON audit(connection_alias, seq);
CREATE INDEX audit_connection_id ON audit(connection_id, seq);
