-- 0019: the audit head to notification channels that ask for it (issue 24:
-- "postern publishes the head ... to notification channels that ask for it
-- (event audit.head, signed like the others)").
--
-- A channel may now subscribe to audit.head alone (a receiver that keeps
-- heads, apart from the people who decide), so the rule that a channel
-- subscribes to something takes on_audit_head too. An outbox row is about an
-- operation's approval request, a change request, or a published head
-- (head, SEQ:HASH as `postern audit head` prints it): exactly one of the
-- three is set.
--
-- SQLite cannot change a CHECK in place, so both tables are made anew and
-- their rows copied. The new outbox refers to the new channels table, and
-- the old outbox is dropped before the old channels table, so that no drop
-- deletes a row through ON DELETE CASCADE; renaming the new channels table
-- rewrites the outbox's reference to it (SQLite 3.26 and later).
CREATE TABLE notify_channels_new (
    id               TEXT PRIMARY KEY,
    name             TEXT NOT NULL UNIQUE,
    format           TEXT NOT NULL CHECK (format IN ('json', 'slack', 'ntfy')),
    sealed_url       BLOB NOT NULL,
    url_shown        TEXT NOT NULL,
    sealed_secret    BLOB,
    on_pending       INTEGER NOT NULL CHECK (on_pending IN (0, 1)),
    on_decided       INTEGER NOT NULL CHECK (on_decided IN (0, 1)),
    last_delivery_at TEXT NOT NULL DEFAULT '',
    last_failure_at  TEXT NOT NULL DEFAULT '',
    last_error       TEXT NOT NULL DEFAULT '',
    created_at       TEXT NOT NULL,
    modified_at      TEXT NOT NULL,
    on_audit_head    INTEGER NOT NULL DEFAULT 0 CHECK (on_audit_head IN (0, 1)),
    CHECK (on_pending = 1 OR on_decided = 1 OR on_audit_head = 1)
) STRICT;
INSERT INTO notify_channels_new (id, name, format, sealed_url, url_shown, sealed_secret, on_pending, on_decided,
    last_delivery_at, last_failure_at, last_error, created_at, modified_at)
    SELECT id, name, format, sealed_url, url_shown, sealed_secret, on_pending, on_decided,
    last_delivery_at, last_failure_at, last_error, created_at, modified_at FROM notify_channels;
CREATE TABLE notify_outbox_new (
    id            TEXT PRIMARY KEY,
    channel_id    TEXT NOT NULL REFERENCES notify_channels_new(id) ON DELETE CASCADE,
    approval_id   TEXT REFERENCES approvals(id) ON DELETE CASCADE,
    event         TEXT NOT NULL CHECK (event IN ('pending', 'decided', 'bound', 'audit.head')),
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
    head          TEXT,
    CHECK ((approval_id IS NOT NULL) + (change_id IS NOT NULL) + (head IS NOT NULL) = 1),
    -- A bound summary rides on an operation's request, never on a change.
    CHECK (event <> 'bound' OR approval_id IS NOT NULL),
    -- A head is the audit.head event's subject, and only its.
    CHECK ((event = 'audit.head') = (head IS NOT NULL))
) STRICT;
INSERT INTO notify_outbox_new (id, channel_id, approval_id, event, state, attempts, due_at, give_up_at,
    claim, last_status, last_error, created_at, modified_at, done_at, bound_scope, bound_waiting, change_id)
    SELECT id, channel_id, approval_id, event, state, attempts, due_at, give_up_at,
    claim, last_status, last_error, created_at, modified_at, done_at, bound_scope, bound_waiting, change_id FROM notify_outbox;
DROP TABLE notify_outbox;
DROP TABLE notify_channels;
ALTER TABLE notify_channels_new RENAME TO notify_channels;
ALTER TABLE notify_outbox_new RENAME TO notify_outbox;
CREATE INDEX notify_outbox_due ON notify_outbox(state, due_at);
CREATE INDEX notify_outbox_channel ON notify_outbox(channel_id, state);
CREATE INDEX notify_outbox_approval ON notify_outbox(approval_id);
CREATE INDEX notify_outbox_modified ON notify_outbox(modified_at);
CREATE INDEX notify_outbox_change ON notify_outbox(change_id);
CREATE INDEX notify_outbox_head ON notify_outbox(channel_id, head);
