-- PostgreSQL's form of migrations/0014_change_notify.sql (the same step; store/migrate.go).
--
-- 0014: notifications about changes that wait for a second admin (issue
-- 23: the change's before and after are "shown on the card and in
-- notifications").
--
-- An outbox row is about an operation's approval request (approval_id) or
-- about a change request (change_id), never both and never neither: the
-- other column is NULL, which no foreign key checks. Deleting the request
-- deletes its notifications. Every existing row is about an approval.
ALTER TABLE notify_outbox ALTER COLUMN approval_id DROP NOT NULL;
ALTER TABLE notify_outbox ADD COLUMN change_id TEXT COLLATE "C" REFERENCES change_requests(id) ON DELETE CASCADE;
ALTER TABLE notify_outbox ADD CONSTRAINT notify_outbox_subject_check CHECK ((approval_id IS NULL) <> (change_id IS NULL));
-- A bound summary rides on an operation's request, never on a change.
ALTER TABLE notify_outbox ADD CONSTRAINT notify_outbox_bound_check CHECK (event <> 'bound' OR approval_id IS NOT NULL);
CREATE INDEX notify_outbox_change ON notify_outbox(change_id);
