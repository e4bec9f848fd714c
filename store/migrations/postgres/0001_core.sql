-- PostgreSQL's form of migrations/0001_core.sql (the same step; store/migrate.go).
--
-- 0001: agents, their public keys, connections and grants.
--
-- Times are RFC 3339 text in UTC with nanoseconds (store.formatTime).
-- Ids are random text with a type prefix (store.newID).

-- meta holds small facts about the database itself, such as the master key
-- check value that tells a wrong master key from a damaged sealed record.
CREATE TABLE meta (
    name  TEXT COLLATE "C" PRIMARY KEY,
    value BYTEA NOT NULL
);

CREATE TABLE agents (
    id          TEXT COLLATE "C" PRIMARY KEY,
    name        TEXT COLLATE "C" NOT NULL UNIQUE,
    disabled    BIGINT NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    created_at  TEXT COLLATE "C" NOT NULL,
    modified_at TEXT COLLATE "C" NOT NULL
);

-- An agent may hold several keys (a laptop and a CI runner); a key belongs to
-- exactly one agent, because the key is how the bastion learns who connects.
CREATE TABLE agent_keys (
    id             TEXT COLLATE "C" PRIMARY KEY,
    agent_id       TEXT COLLATE "C" NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    authorized_key TEXT COLLATE "C" NOT NULL,
    fingerprint    TEXT COLLATE "C" NOT NULL UNIQUE,
    created_at     TEXT COLLATE "C" NOT NULL
);
CREATE INDEX agent_keys_agent ON agent_keys(agent_id);

CREATE TABLE connections (
    id             TEXT COLLATE "C" PRIMARY KEY,
    alias          TEXT COLLATE "C" NOT NULL UNIQUE,
    host           TEXT COLLATE "C" NOT NULL,
    port           BIGINT NOT NULL CHECK (port BETWEEN 1 AND 65535),
    target_user    TEXT COLLATE "C" NOT NULL,
    -- nonce || XChaCha20-Poly1305 ciphertext, associated data = id.
    sealed_key     BYTEA NOT NULL,
    -- One known_hosts line per pinned key, separated by newlines.
    host_keys      TEXT COLLATE "C" NOT NULL,
    recipe         TEXT COLLATE "C" NOT NULL DEFAULT '',
    env            TEXT COLLATE "C" NOT NULL CHECK (env IN ('dev', 'test', 'staging', 'production')),
    key_status     TEXT COLLATE "C" NOT NULL DEFAULT 'unknown' CHECK (key_status IN ('unknown', 'ok', 'rejected')),
    key_message    TEXT COLLATE "C" NOT NULL DEFAULT '',
    key_checked_at TEXT COLLATE "C" NOT NULL DEFAULT '',
    created_at     TEXT COLLATE "C" NOT NULL,
    modified_at    TEXT COLLATE "C" NOT NULL
);

CREATE TABLE grants (
    id            TEXT COLLATE "C" PRIMARY KEY,
    agent_id      TEXT COLLATE "C" NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    connection_id TEXT COLLATE "C" NOT NULL REFERENCES connections(id) ON DELETE CASCADE,
    read_rule     TEXT COLLATE "C" NOT NULL CHECK (read_rule IN ('allow', 'ask', 'deny')),
    write_rule    TEXT COLLATE "C" NOT NULL CHECK (write_rule IN ('allow', 'ask', 'deny')),
    destructive_rule TEXT COLLATE "C" NOT NULL CHECK (destructive_rule IN ('allow', 'ask', 'deny')),
    created_at    TEXT COLLATE "C" NOT NULL,
    modified_at   TEXT COLLATE "C" NOT NULL,
    UNIQUE (agent_id, connection_id)
);
CREATE INDEX grants_connection ON grants(connection_id);
