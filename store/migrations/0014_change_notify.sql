-- 0014: notifications about changes that wait for a second admin (issue
-- 23: the change's before and after are "shown on the card and in
-- notifications").
--
-- An outbox row is about an operation's approval request (approval_id) or
-- about a change request (change_id), never both and never neither: the
-- other column is NULL, which no foreign key checks. Deleting the request
-- deletes its notifications. SQLite cannot make a column nullable or add a
-- CHECK in place, so the table is made anew and its rows copied (every
-- existing row is about an approval). Nothing references notify_outbox, so
-- dropping the old table breaks no foreign key.
CREATE TABLE notify_outbox_new (
    id            TEXT PRIMARY KEY,
    channel_id    TEXT NOT NULL REFERENCES notify_channels(id) ON DELETE CASCADE,
    approval_id   TEXT REFERENCES approvals(id) ON DELETE CASCADE,
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
    bound_waiting INTEGER NOT NULL DEFAULT 0,
    change_id     TEXT REFERENCES change_requests(id) ON DELETE CASCADE,
    CHECK ((approval_id IS NULL) <> (change_id IS NULL)),
    -- A bound summary rides on an operation's request, never on a change.
    CHECK (event <> 'bound' OR approval_id IS NOT NULL)
) STRICT;
INSERT INTO notify_outbox_new (id, channel_id, approval_id, event, state, attempts, due_at, give_up_at,
    claim, last_status, last_error, created_at, modified_at, done_at, bound_scope, bound_waiting)
    SELECT id, channel_id, approval_id, event, state, attempts, due_at, give_up_at,
    claim, last_status, last_error, created_at, modified_at, done_at, bound_scope, bound_waiting FROM notify_outbox;
DROP TABLE notify_outbox;
ALTER TABLE notify_outbox_new RENAME TO notify_outbox;
CREATE INDEX notify_outbox_due ON notify_outbox(state, due_at);
CREATE INDEX notify_outbox_channel ON notify_outbox(channel_id, state);
CREATE INDEX notify_outbox_approval ON notify_outbox(approval_id);
CREATE INDEX notify_outbox_modified ON notify_outbox(modified_at);
CREATE INDEX notify_outbox_change ON notify_outbox(change_id);
