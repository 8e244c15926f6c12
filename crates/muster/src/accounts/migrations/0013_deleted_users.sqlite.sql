-- Deleted accounts: every node keeps refusing their tokens until those would have expired.
CREATE TABLE deleted_users (
    user_id TEXT PRIMARY KEY NOT NULL,
    delete_time_ms BIGINT NOT NULL
);
-- An account's records, found when it is deleted.
CREATE INDEX leaderboard_records_owner ON leaderboard_records (owner_id);
