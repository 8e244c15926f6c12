-- Resets and ends of leaderboards and tournaments that server code has been told of
-- (crates/muster/src/leaderboards/schedule.rs): a node tells an event only after inserting its
-- row, so in a cluster one node tells each. Rows older than 30 days are pruned as new ones come.
CREATE TABLE leaderboard_events (
    leaderboard_id TEXT NOT NULL,
    -- 0: a leaderboard's reset, 1: a tournament's end, 2: a tournament's reset.
    kind SMALLINT NOT NULL,
    -- Unix seconds: when the event fell due.
    at BIGINT NOT NULL,
    node TEXT NOT NULL,
    PRIMARY KEY (leaderboard_id, kind, at)
);
