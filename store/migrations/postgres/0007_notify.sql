-- PostgreSQL's form of migrations/0007_notify.sql (the same step; store/migrate.go).
--
-- Notification channels and the outbox of their deliveries (issue 14, "Tell
-- the people who decide"; docs/notifications.md).
--
-- Delivery is built on the database, not on in-process hooks: the
-- transaction that creates or decides an approval also writes one outbox row
-- per subscribed channel, whichever process (the bastion, the admin CLI, a
-- second postern serve) made the change, and every serving postern runs a
-- dispatcher that claims due rows and sends them.

-- A channel is a webhook URL and how to speak to it. The URL may carry a
-- token (a Slack webhook's path, an ntfy topic, which is its own password),
-- so it is sealed under the master key like a connection's private key, with
-- associated data id || ':url'; url_shown is what lists show instead:
-- scheme://host/… with the path left out. sealed_secret (associated data
-- id || ':secret') is the HMAC key of a json channel's X-Postern-Signature or
-- an ntfy channel's access token; NULL when there is none.
CREATE TABLE notify_channels (
    id               TEXT COLLATE "C" PRIMARY KEY,
    name             TEXT COLLATE "C" NOT NULL UNIQUE,
    format           TEXT COLLATE "C" NOT NULL CHECK (format IN ('json', 'slack', 'ntfy')),
    sealed_url       BYTEA NOT NULL,
    url_shown        TEXT COLLATE "C" NOT NULL,
    sealed_secret    BYTEA,
    on_pending       BIGINT NOT NULL CHECK (on_pending IN (0, 1)),
    on_decided       BIGINT NOT NULL CHECK (on_decided IN (0, 1)),
    -- The last delivery (or test) that the receiver accepted, and the last
    -- that failed with why, for the page and `postern notify list`.
    last_delivery_at TEXT COLLATE "C" NOT NULL DEFAULT '',
    last_failure_at  TEXT COLLATE "C" NOT NULL DEFAULT '',
    last_error       TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at       TEXT COLLATE "C" NOT NULL,
    modified_at      TEXT COLLATE "C" NOT NULL,
    CHECK (on_pending = 1 OR on_decided = 1)
);

-- One row per (channel, approval, event) to deliver. A row is 'queued' until
-- a dispatcher claims it: the claim is one conditional UPDATE that sets
-- state 'sending', a claim value of its own and due_at to the end of its
-- lease, so two dispatchers never hold one row. The claimant writes the
-- outcome only if the row still carries its claim: 'delivered', 'queued'
-- again with due_at at the next attempt, 'failed' (the receiver refused, or
-- give_up_at passed first) or 'cancelled' (a pending event for a request
-- that was decided before it could be sent). A 'sending' row whose lease
-- ran out (its dispatcher died) is claimable again.
CREATE TABLE notify_outbox (
    id          TEXT COLLATE "C" PRIMARY KEY,
    channel_id  TEXT COLLATE "C" NOT NULL REFERENCES notify_channels(id) ON DELETE CASCADE,
    approval_id TEXT COLLATE "C" NOT NULL REFERENCES approvals(id) ON DELETE CASCADE,
    event       TEXT COLLATE "C" NOT NULL CHECK (event IN ('pending', 'decided')),
    state       TEXT COLLATE "C" NOT NULL CHECK (state IN ('queued', 'sending', 'delivered', 'failed', 'cancelled')),
    attempts    BIGINT NOT NULL DEFAULT 0,
    due_at      TEXT COLLATE "C" NOT NULL,
    -- The request's expiry for a pending event; the decision plus
    -- store.NotifyDecidedWindow for a decided one.
    give_up_at  TEXT COLLATE "C" NOT NULL,
    claim       TEXT COLLATE "C" NOT NULL DEFAULT '',
    -- The receiver's HTTP status at the last attempt (0: none, such as a
    -- timeout) and what went wrong, never the URL.
    last_status BIGINT NOT NULL DEFAULT 0,
    last_error  TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at  TEXT COLLATE "C" NOT NULL,
    modified_at TEXT COLLATE "C" NOT NULL,
    done_at     TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX notify_outbox_due ON notify_outbox(state, due_at);
CREATE INDEX notify_outbox_channel ON notify_outbox(channel_id, state);
CREATE INDEX notify_outbox_approval ON notify_outbox(approval_id);
CREATE INDEX notify_outbox_modified ON notify_outbox(modified_at);
