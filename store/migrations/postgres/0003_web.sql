-- PostgreSQL's form of migrations/0003_web.sql (the same step; store/migrate.go).
--
-- 0003: what the admin web page and the REST API need: admin accounts, their
-- browser sessions, console tokens for automation, and remembered answers
-- for retried state-changing API calls (Idempotency-Key).
--
-- No secret is stored in a form that can be used: passwords as argon2id
-- hashes (PHC string), session and console tokens as the hex SHA-256 of the
-- token (they are 256-bit random values, so a fast hash is enough).

CREATE TABLE admins (
    id            TEXT COLLATE "C" PRIMARY KEY,
    name          TEXT COLLATE "C" NOT NULL UNIQUE,
    password_hash TEXT COLLATE "C" NOT NULL,
    disabled      BIGINT NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    created_at    TEXT COLLATE "C" NOT NULL,
    modified_at   TEXT COLLATE "C" NOT NULL
);

CREATE TABLE admin_sessions (
    id           TEXT COLLATE "C" PRIMARY KEY,
    token_sha256 TEXT COLLATE "C" NOT NULL UNIQUE CHECK (length(token_sha256) = 64),
    admin_id     TEXT COLLATE "C" NOT NULL REFERENCES admins(id) ON DELETE CASCADE,
    -- The CSRF token of the session: every state-changing form carries it.
    csrf_token   TEXT COLLATE "C" NOT NULL,
    created_at   TEXT COLLATE "C" NOT NULL,
    expires_at   TEXT COLLATE "C" NOT NULL
);
CREATE INDEX admin_sessions_admin ON admin_sessions(admin_id);
CREATE INDEX admin_sessions_expires ON admin_sessions(expires_at);

CREATE TABLE console_tokens (
    id           TEXT COLLATE "C" PRIMARY KEY,
    name         TEXT COLLATE "C" NOT NULL UNIQUE,
    token_sha256 TEXT COLLATE "C" NOT NULL UNIQUE CHECK (length(token_sha256) = 64),
    created_at   TEXT COLLATE "C" NOT NULL,
    modified_at  TEXT COLLATE "C" NOT NULL,
    last_used_at TEXT COLLATE "C" NOT NULL DEFAULT ''
);

-- One row per (principal, Idempotency-Key): the first answer to a
-- state-changing call, replayed for a retry with the same key. request_sha256
-- binds the key to the method, path and body, so that reusing a key for a
-- different request is refused rather than answered with the wrong result.
CREATE TABLE idempotency_keys (
    principal      TEXT COLLATE "C" NOT NULL,
    key            TEXT COLLATE "C" NOT NULL,
    request_sha256 TEXT COLLATE "C" NOT NULL,
    status         BIGINT NOT NULL,
    body           BYTEA NOT NULL,
    created_at     TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (principal, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);

-- Why the classifier put an approval's operation in its class, redacted like
-- the operation: the web page shows it to the admin who decides.
ALTER TABLE approvals ADD COLUMN reasons TEXT COLLATE "C" NOT NULL DEFAULT '';
