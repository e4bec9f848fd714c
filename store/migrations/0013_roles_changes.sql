-- 0013: roles, and changes that wait for a second admin (issue 23).
--
-- An admin's role bounds what the admin may do, on every door: viewer sees
-- everything and decides nothing, approver also decides approvals and
-- re-checks keys, admin also changes configuration, owner also manages
-- admins and their roles. Admins made before roles existed could do all
-- of that, so they become owners: taking a power away from a running
-- installation is an owner's decision, not a migration's.
ALTER TABLE admins ADD COLUMN role TEXT NOT NULL DEFAULT 'owner'
    CHECK (role IN ('viewer', 'approver', 'admin', 'owner'));

-- A change that loosens the protection of a production connection (or adds
-- an owner or admin, raises a role, makes an approve or admin token) is not
-- made when asked: it waits here for a second admin, in the approvals
-- queue as a request of kind change. payload is what the change writes
-- once approved, sealed with the master key (it can hold a private key or
-- a password hash); summary, before and after are what the admins read.
-- requested_by_id is '' when the CLI's OS user asked (cli:NAME): no
-- registered admin, so any one of them is a second person.
CREATE TABLE change_requests (
    id               TEXT PRIMARY KEY,
    kind             TEXT NOT NULL,
    summary          TEXT NOT NULL,
    before_text      TEXT NOT NULL,
    after_text       TEXT NOT NULL,
    payload          BLOB NOT NULL,
    requested_by     TEXT NOT NULL,
    requested_by_id  TEXT NOT NULL,
    requested_via    TEXT NOT NULL,
    agent_id         TEXT NOT NULL DEFAULT '',
    agent_name       TEXT NOT NULL DEFAULT '',
    connection_id    TEXT NOT NULL DEFAULT '',
    connection_alias TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'failed')),
    decided_by       TEXT NOT NULL DEFAULT '',
    decided_by_id    TEXT NOT NULL DEFAULT '',
    decided_at       TEXT NOT NULL DEFAULT '',
    reason           TEXT NOT NULL DEFAULT '',
    expires_at       TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    modified_at      TEXT NOT NULL
) STRICT;
CREATE INDEX change_requests_status ON change_requests(status, created_at);
