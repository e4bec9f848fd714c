-- 0017: locks (issue 24). A lock on an agent or a connection ends its live
-- sessions and refuses new ones until it is removed or expires_at passes
-- ('' = until removed). One lock per agent or connection: locking again
-- replaces it. target_id is an agent's or a connection's id (by
-- target_kind), so no foreign key checks it; target_name is its name or
-- alias when locked, for lists. created_by_id is '' for the CLI's OS user.
CREATE TABLE locks (
    id            TEXT PRIMARY KEY,
    target_kind   TEXT NOT NULL CHECK (target_kind IN ('agent', 'connection')),
    target_id     TEXT NOT NULL,
    target_name   TEXT NOT NULL,
    reason        TEXT NOT NULL DEFAULT '',
    created_by    TEXT NOT NULL,
    created_by_id TEXT NOT NULL DEFAULT '',
    created_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL DEFAULT '',
    UNIQUE (target_kind, target_id)
) STRICT;
CREATE INDEX locks_target ON locks(target_id);
