-- PostgreSQL's form of migrations/0019_audit_head_notify.sql (the same step; store/migrate.go).
--
-- 0019: the audit head to notification channels that ask for it (event
-- audit.head). A channel may subscribe to audit.head alone; an outbox row
-- is about an approval request, a change request or a published head
-- (SEQ:HASH), exactly one of the three.
ALTER TABLE notify_channels ADD COLUMN on_audit_head BIGINT NOT NULL DEFAULT 0 CHECK (on_audit_head IN (0, 1));
ALTER TABLE notify_channels DROP CONSTRAINT notify_channels_check;
ALTER TABLE notify_channels ADD CONSTRAINT notify_channels_check CHECK (on_pending = 1 OR on_decided = 1 OR on_audit_head = 1);
ALTER TABLE notify_outbox DROP CONSTRAINT notify_outbox_event_check;
ALTER TABLE notify_outbox ADD CONSTRAINT notify_outbox_event_check CHECK (event IN ('pending', 'decided', 'bound', 'audit.head'));
ALTER TABLE notify_outbox ADD COLUMN head TEXT COLLATE "C";
ALTER TABLE notify_outbox DROP CONSTRAINT notify_outbox_subject_check;
ALTER TABLE notify_outbox ADD CONSTRAINT notify_outbox_subject_check
    CHECK ((approval_id IS NOT NULL)::int + (change_id IS NOT NULL)::int + (head IS NOT NULL)::int = 1);
ALTER TABLE notify_outbox ADD CONSTRAINT notify_outbox_head_check CHECK ((event = 'audit.head') = (head IS NOT NULL));
CREATE INDEX notify_outbox_head ON notify_outbox(channel_id, head);
