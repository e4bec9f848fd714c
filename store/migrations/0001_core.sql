-- 0001: agents, their public keys, connections and grants.
--
-- Times are RFC 3339 text in UTC with nanoseconds (store.formatTime).
-- Ids are random text with a type prefix (store.newID).

-- meta holds small facts about the database itself, such as the master key
-- check value that tells a wrong master key from a damaged sealed record.
CREATE TABLE meta (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
) STRICT;

CREATE TABLE agents (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    disabled    INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    created_at  TEXT NOT NULL,
    modified_at TEXT NOT NULL
) STRICT;

-- An agent may hold several keys (a laptop and a CI runner); a key belongs to
-- exactly one agent, because the key is how the bastion learns who connects.
CREATE TABLE agent_keys (
    id             TEXT PRIMARY KEY,
    agent_id       TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    authorized_key TEXT NOT NULL,
    fingerprint    TEXT NOT NULL UNIQUE,
    created_at     TEXT NOT NULL
) STRICT;
CREATE INDEX agent_keys_agent ON agent_keys(agent_id);

CREATE TABLE connections (
    id             TEXT PRIMARY KEY,
    alias          TEXT NOT NULL UNIQUE,
    host           TEXT NOT NULL,
    port           INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),
    target_user    TEXT NOT NULL,
    -- nonce || XChaCha20-Poly1305 ciphertext, associated data = id.
    sealed_key     BLOB NOT NULL,
    -- One known_hosts line per pinned key, separated by newlines.
    host_keys      TEXT NOT NULL,
    recipe         TEXT NOT NULL DEFAULT '',
    env            TEXT NOT NULL CHECK (env IN ('dev', 'test', 'staging', 'production')),
    key_status     TEXT NOT NULL DEFAULT 'unknown' CHECK (key_status IN ('unknown', 'ok', 'rejected')),
    key_message    TEXT NOT NULL DEFAULT '',
    key_checked_at TEXT NOT NULL DEFAULT '',
    created_at     TEXT NOT NULL,
    modified_at    TEXT NOT NULL
) STRICT;

CREATE TABLE grants (
    id            TEXT PRIMARY KEY,
    agent_id      TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    connection_id TEXT NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    read_rule     TEXT NOT NULL CHECK (read_rule IN ('allow', 'ask', 'deny')),
    write_rule    TEXT NOT NULL CHECK (write_rule IN ('allow', 'ask', 'deny')),
    destructive_rule TEXT NOT NULL CHECK (destructive_rule IN ('allow', 'ask', 'deny')),
    created_at    TEXT NOT NULL,
    modified_at   TEXT NOT NULL,
    UNIQUE (agent_id, connection_id)
) STRICT;
CREATE INDEX grants_connection ON grants(connection_id);
