-- PostgreSQL's form of migrations/0009_replicas.sql (the same step; store/migrate.go).
--
-- 0009: several `postern serve` on one database (issue 16).
--
-- Each running `postern serve` is a replica, registered here at start with a
-- random id and kept alive by a heartbeat that moves expires_at forward (its
-- lease). A journal row (0004) now names the replica that let its operation
-- through: only once that replica's lease has run out — it was killed, or
-- could not reach the database for longer than the lease — does another
-- replica record the operation as interrupted; a replica that starts never
-- takes a live replica's running operations for interrupted ones. Journal
-- rows written before this step have owner '' and belong to nobody alive.
CREATE TABLE replicas (
    id           TEXT COLLATE "C" PRIMARY KEY,
    -- Where it runs, for `postern replicas` and the logs: the host name and
    -- the process id.
    host         TEXT COLLATE "C" NOT NULL,
    pid          BIGINT NOT NULL,
    started_at   TEXT COLLATE "C" NOT NULL,
    heartbeat_at TEXT COLLATE "C" NOT NULL,
    expires_at   TEXT COLLATE "C" NOT NULL
);

ALTER TABLE inflight ADD COLUMN owner TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX inflight_owner ON inflight(owner);

-- PostgreSQL only: the database announces every change to an approval
-- request that a waiting agent or a live page cares about — a new request,
-- a decision (or the first of two approvals), an expiry, a revoked scope, a
-- removal — on the channel postern_approvals, with the request's id as
-- payload. NOTIFY is sent when the transaction commits, to every replica
-- that listens (store/pgwatch.go), whoever made the change: a replica, the
-- admin CLI, the REST API, or SQL typed by hand. A request consumed by its
-- operation is not announced: nobody waits for that.
CREATE FUNCTION postern_approvals_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('postern_approvals', OLD.id);
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.status = OLD.status AND NEW.first_approver = OLD.first_approver
            AND NEW.scope_revoked_at = OLD.scope_revoked_at THEN
        RETURN NEW;
    END IF;
    PERFORM pg_notify('postern_approvals', NEW.id);
    RETURN NEW;
END
$$;

CREATE TRIGGER approvals_notify AFTER INSERT OR UPDATE OR DELETE ON approvals
    FOR EACH ROW EXECUTE FUNCTION postern_approvals_notify();
