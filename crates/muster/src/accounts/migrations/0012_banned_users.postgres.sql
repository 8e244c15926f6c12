-- Banned accounts (disable_time_ms set) are few: every node reads them at start and on its
-- periodic reload, so that a banned player's tokens are refused everywhere.
CREATE INDEX users_banned ON users (id) WHERE disable_time_ms IS NOT NULL;
