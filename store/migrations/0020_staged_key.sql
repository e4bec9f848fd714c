-- 0020: staged key rotation (issue 25: "conn rotate-key ALIAS --generate
-- stages the new key beside the current one ... --commit switches only
-- when the new key is proved").
--
-- staged_key is the staged private key, sealed with the master key like
-- sealed_key (associated data: the connection's id with "/staged", so it
-- never opens as the current key); NULL when none is staged.
-- staged_public is its public half as an authorized_keys line, shown
-- without the master key. staged_status, staged_message and
-- staged_checked_at are the staged key's last check ('unchecked' until one
-- ran).
ALTER TABLE connections ADD COLUMN staged_key BLOB;
ALTER TABLE connections ADD COLUMN staged_public TEXT NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN staged_at TEXT NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN staged_status TEXT NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN staged_message TEXT NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN staged_checked_at TEXT NOT NULL DEFAULT '';
