-- PostgreSQL's form of migrations/0006_audit_agent_facts.sql (the same step; store/migrate.go).
--
-- 0006: the audit row keeps what the agent said the operation is for
-- (POSTERN_REASON, redacted and length-limited by package policy) and the
-- address it connected from, next to the decision they informed.
--
-- Both are inside the hash chain from this step on: a row's chain_version
-- says which encoding its hash uses (policy/chain.go). Rows written before
-- this step are version 1, whose encoding has neither field; a version 1
-- row with either field set does not verify.
ALTER TABLE audit ADD COLUMN chain_version BIGINT NOT NULL DEFAULT 1 CHECK (chain_version IN (1, 2));
ALTER TABLE audit ADD COLUMN agent_reason TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN source_addr TEXT COLLATE "C" NOT NULL DEFAULT '';
