-- Revocations read by what changed: each row records when it was stored (the database's clock,
-- Unix ms), so a node loads only the revocations made since its last look, and pruning by expiry
-- uses an index instead of a scan. Rows from before this migration count as stored now.
ALTER TABLE revoked_tokens ADD COLUMN created_ms BIGINT NOT NULL DEFAULT 0;
UPDATE revoked_tokens SET created_ms = (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
CREATE INDEX revoked_tokens_created ON revoked_tokens (created_ms);
CREATE INDEX revoked_tokens_expires ON revoked_tokens (expires_at);
