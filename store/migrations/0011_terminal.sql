-- 0011: a session with a terminal (issue 28). A pty makes any command an
-- interactive shell (its pager or prompt runs what is typed), so such a
-- request is approved on its own: terminal_life_ms is the longest the
-- session may run once approved, in milliseconds, and 0 for a request
-- without a terminal. A request with a terminal is never matched to one
-- without (or to one with another life), and no scope covers it.
ALTER TABLE approvals ADD COLUMN terminal_life_ms INTEGER NOT NULL DEFAULT 0 CHECK (terminal_life_ms >= 0);
