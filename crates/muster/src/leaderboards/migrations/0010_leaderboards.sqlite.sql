-- Leaderboards (crates/muster/src/leaderboards): their definitions and their records, one row per
-- owner and period (expiry_time: the Unix second the period ends, 0 for a board that never
-- resets), as Nakama keeps them.
CREATE TABLE leaderboards (
    id TEXT PRIMARY KEY,
    authoritative INTEGER NOT NULL,
    -- 0 ascending (lower is better), 1 descending.
    sort_order INTEGER NOT NULL,
    -- 0 best, 1 set, 2 increment, 3 decrement.
    operator INTEGER NOT NULL,
    reset_schedule TEXT NOT NULL,
    metadata TEXT NOT NULL,
    create_time_ms INTEGER NOT NULL
);
CREATE TABLE leaderboard_records (
    leaderboard_id TEXT NOT NULL,
    expiry_time INTEGER NOT NULL,
    owner_id TEXT NOT NULL,
    username TEXT NOT NULL,
    score INTEGER NOT NULL,
    subscore INTEGER NOT NULL,
    num_score INTEGER NOT NULL,
    max_num_score INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    create_time_ms INTEGER NOT NULL,
    update_time_ms INTEGER NOT NULL,
    PRIMARY KEY (leaderboard_id, expiry_time, owner_id)
);
-- Pages of a period in rank order.
CREATE INDEX leaderboard_records_ranked
    ON leaderboard_records (leaderboard_id, expiry_time, score, subscore, owner_id);
