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
    scope      TEXT NOT NULL CHECK (scope IN ('agent', 'connection')),
    subject_id TEXT NOT NULL,
    started_at TEXT NOT NULL,
    PRIMARY KEY (scope, subject_id)
) STRICT;

-- Counting an agent's or a connection's pending requests reads these
-- instead of the agent's whole history.
CREATE INDEX approvals_agent_status ON approvals(agent_id, status);
CREATE INDEX approvals_connection_status ON approvals(connection_id, status);

-- The outbox gains the event 'bound' (the summary): SQLite cannot change
-- a CHECK in place, so the table is made anew and its rows copied.
-- bound_scope ('agent' or 'connection') and bound_waiting (how many
-- requests waited) describe a summary and are '' and 0 on other events.
-- Nothing references notify_outbox, so dropping the old table breaks no
-- foreign key.
CREATE TABLE notify_outbox_new (
    id            TEXT PRIMARY KEY,
    channel_id    TEXT NOT NULL REFERENCES notify_channels(id) ON DELETE CASCADE,
    approval_id   TEXT NOT NULL REFERENCES approvals(id) ON DELETE CASCADE,
    event         TEXT NOT NULL CHECK (event IN ('pending', 'decided', 'bound')),
    state         TEXT NOT NULL CHECK (state IN ('queued', 'sending', 'delivered', 'failed', 'cancelled')),
    attempts      INTEGER NOT NULL DEFAULT 0,
    due_at        TEXT NOT NULL,
    give_up_at    TEXT NOT NULL,
    claim         TEXT NOT NULL DEFAULT '',
    last_status   INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT NOT NULL DEFAULT '',
    created_at    TEXT NOT NULL,
    modified_at   TEXT NOT NULL,
    done_at       TEXT NOT NULL DEFAULT '',
    bound_scope   TEXT NOT NULL DEFAULT '' CHECK (bound_scope IN ('', 'agent', 'connection')),
    bound_waiting INTEGER NOT NULL DEFAULT 0
) STRICT;
INSERT INTO notify_outbox_new (id, channel_id, approval_id, event, state, attempts, due_at, give_up_at,
    claim, last_status, last_error, created_at, modified_at, done_at)
    SELECT id, channel_id, approval_id, event, state, attempts, due_at, give_up_at,
    claim, last_status, last_error, created_at, modified_at, done_at FROM notify_outbox;
DROP TABLE notify_outbox;
ALTER TABLE notify_outbox_new RENAME TO notify_outbox;
CREATE INDEX notify_outbox_due ON notify_outbox(state, due_at);
CREATE INDEX notify_outbox_channel ON notify_outbox(channel_id, state);
CREATE INDEX notify_outbox_approval ON notify_outbox(approval_id);
CREATE INDEX notify_outbox_modified ON notify_outbox(modified_at);
