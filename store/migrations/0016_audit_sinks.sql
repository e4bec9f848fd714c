-- 0016: streaming audit sinks (issue 24, "out to where logs live").
--
-- serve ships every audit row, in seq order, to each configured sink
-- (syslog, a JSON lines file, an HTTP collector; package auditsink). A
-- sink's row here is its cursor: seq is the last row the receiver took, so
-- that after a restart of postern or an outage of the receiver shipping
-- resumes with the row after it, at least once and in order. A new sink
-- starts at 0: it receives the whole log.
--
-- With several replicas on one database, one replica ships a given sink at
-- a time: holder is the replica (a random id per serve) that holds the
-- sink's lease until lease_expires; another takes it over only once it has
-- run out, and resumes from the cursor, so rows are shipped at least once
-- across a failover. A released lease has lease_expires ''.
CREATE TABLE audit_sink_cursors (
    name          TEXT PRIMARY KEY,
    seq           INTEGER NOT NULL DEFAULT 0 CHECK (seq >= 0),
    updated_at    TEXT NOT NULL,
    holder        TEXT NOT NULL DEFAULT '',
    lease_expires TEXT NOT NULL DEFAULT ''
) STRICT;
