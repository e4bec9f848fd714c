-- 0015: every audit row names the agent's SSH connection it came from
-- (session_id, "ses_..." made when the connection is authenticated; ""
-- for rows no connection wrote: an admin's change, a recovered journal
-- row of a build before this step). One connection of an OpenSSH
-- ControlMaster carries many commands; the id groups them.
--
-- The id is inside the hash chain from this step on: chain version 3
-- (policy/chain.go). Rows keep their version; a version 1 or 2 row with a
-- session id does not verify. SQLite cannot change the CHECK on
-- chain_version in place, so the table is made anew and its rows copied
-- as they are (hashes included: no hashed field changes). Nothing
-- references audit, so dropping the old table breaks no foreign key.
--
-- The audit page and GET /v1/audit read a page of rows newest first by
-- seq under a filter; the indexes below let a filter on a session, an
-- agent or a connection read only its own rows in seq order.
CREATE TABLE audit_new (
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
    hash             BLOB NOT NULL,
    chain_version    INTEGER NOT NULL DEFAULT 1 CHECK (chain_version IN (1, 2, 3)),
    agent_reason     TEXT NOT NULL DEFAULT '',
    source_addr      TEXT NOT NULL DEFAULT '',
    session_id       TEXT NOT NULL DEFAULT ''
) STRICT;
INSERT INTO audit_new (seq, time, agent_id, agent_name, connection_id, connection_alias, class, kind,
    decision, reason, approval_id, deciders, operation, exit_status, duration_ns, bytes_in, bytes_out,
    hash, chain_version, agent_reason, source_addr)
SELECT seq, time, agent_id, agent_name, connection_id, connection_alias, class, kind,
    decision, reason, approval_id, deciders, operation, exit_status, duration_ns, bytes_in, bytes_out,
    hash, chain_version, agent_reason, source_addr FROM audit;
DROP TABLE audit;
ALTER TABLE audit_new RENAME TO audit;
CREATE INDEX audit_time ON audit(time);
CREATE INDEX audit_session ON audit(session_id, seq);
CREATE INDEX audit_agent ON audit(agent_name, seq);
CREATE INDEX audit_agent_id ON audit(agent_id, seq);
CREATE INDEX audit_connection ON audit(connection_alias, seq);
CREATE INDEX audit_connection_id ON audit(connection_id, seq);
