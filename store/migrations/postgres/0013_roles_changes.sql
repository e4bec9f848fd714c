-- PostgreSQL's form of migrations/0013_roles_changes.sql (the same step; store/migrate.go).
--
-- 0013: roles, and changes that wait for a second admin (issue 23).
--
-- An admin's role bounds what the admin may do, on every door: viewer sees
-- everything and decides nothing, approver also decides approvals and
-- re-checks keys, admin also changes configuration, owner also manages
-- admins and their roles. Admins made before roles existed could do all
-- of that, so they become owners: taking a power away from a running
-- installation is an owner's decision, not a migration's.
ALTER TABLE admins ADD COLUMN role TEXT COLLATE "C" NOT NULL DEFAULT 'owner'
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
    id               TEXT COLLATE "C" PRIMARY KEY,
    kind             TEXT COLLATE "C" NOT NULL,
    summary          TEXT COLLATE "C" NOT NULL,
    before_text      TEXT COLLATE "C" NOT NULL,
    after_text       TEXT COLLATE "C" NOT NULL,
    payload          BYTEA NOT NULL,
    requested_by     TEXT COLLATE "C" NOT NULL,
    requested_by_id  TEXT COLLATE "C" NOT NULL,
    requested_via    TEXT COLLATE "C" NOT NULL,
    agent_id         TEXT COLLATE "C" NOT NULL DEFAULT '',
    agent_name       TEXT COLLATE "C" NOT NULL DEFAULT '',
    connection_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
    connection_alias TEXT COLLATE "C" NOT NULL DEFAULT '',
    status           TEXT COLLATE "C" NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'failed')),
    decided_by       TEXT COLLATE "C" NOT NULL DEFAULT '',
    decided_by_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
    decided_at       TEXT COLLATE "C" NOT NULL DEFAULT '',
    reason           TEXT COLLATE "C" NOT NULL DEFAULT '',
    expires_at       TEXT COLLATE "C" NOT NULL,
    created_at       TEXT COLLATE "C" NOT NULL,
    modified_at      TEXT COLLATE "C" NOT NULL
);
CREATE INDEX change_requests_status ON change_requests(status, created_at);
