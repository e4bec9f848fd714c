-- PostgreSQL's form of migrations/0012_pending_bound.sql (the same step; store/migrate.go).
--
-- 0012: a bound on the requests that wait for a decision (issue 23: one
-- agent opened 60 pending requests in 6 seconds, each a card and a
-- notification). Past the bound a new request is denied at once, and the
-- approvers get one summary notification per episode instead of one per
-- request.
--
-- pending_bounds holds the open episodes: one row per agent or connection
-- whose bound refused a request and whose queue has not drained since. The
-- refusal that inserts the row is the one that queues the summary; the
-- next request that finds that agent's (connection's) queue empty deletes
-- it. Both happen under the database's write lock, so of any number of
-- replicas refusing at once exactly one opens the episode.
CREATE TABLE pending_bounds (
    scope      TEXT COLLATE "C" NOT NULL CHECK (scope IN ('agent', 'connection')),
    subject_id TEXT COLLATE "C" NOT NULL,
    started_at TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (scope, subject_id)
);

-- Counting an agent's or a connection's pending requests reads these
-- instead of the agent's whole history.
CREATE INDEX approvals_agent_status ON approvals(agent_id, status);
CREATE INDEX approvals_connection_status ON approvals(connection_id, status);

-- The outbox gains the event 'bound' (the summary). bound_scope ('agent'
-- or 'connection') and bound_waiting (how many requests waited) describe
-- a summary and are '' and 0 on other events.
ALTER TABLE notify_outbox DROP CONSTRAINT notify_outbox_event_check;
ALTER TABLE notify_outbox ADD CONSTRAINT notify_outbox_event_check CHECK (event IN ('pending', 'decided', 'bound'));
ALTER TABLE notify_outbox ADD COLUMN bound_scope TEXT COLLATE "C" NOT NULL DEFAULT ''
    CHECK (bound_scope IN ('', 'agent', 'connection'));
ALTER TABLE notify_outbox ADD COLUMN bound_waiting BIGINT NOT NULL DEFAULT 0;
