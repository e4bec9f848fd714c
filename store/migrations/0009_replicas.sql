-- 0009: several `postern serve` on one database (issue 16).
--
-- Each running `postern serve` is a replica, registered here at start with a
-- random id and kept alive by a heartbeat that moves expires_at forward (its
-- lease). A journal row (0004) now names the replica that let its operation
-- through: only once that replica's lease has run out — it was killed, or
-- could not reach the database for longer than the lease — does another
-- replica record the operation as interrupted; a replica that starts never
-- takes a live replica's running operations for interrupted ones. Journal
-- rows written before this step have owner '' and belong to nobody alive.
CREATE TABLE replicas (
    id           TEXT PRIMARY KEY,
    -- Where it runs, for `postern replicas` and the logs: the host name and
    -- the process id.
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    started_at   TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    expires_at   TEXT NOT NULL
) STRICT;

ALTER TABLE inflight ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX inflight_owner ON inflight(owner);
