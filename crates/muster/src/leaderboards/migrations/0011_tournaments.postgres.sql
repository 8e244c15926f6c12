-- Tournaments (crates/muster/src/leaderboards/tournament.rs): a leaderboard with a duration is
-- a tournament, active from each reset (or its start) for that many seconds, until its end.
ALTER TABLE leaderboards ADD COLUMN title TEXT NOT NULL DEFAULT '';
ALTER TABLE leaderboards ADD COLUMN description TEXT NOT NULL DEFAULT '';
ALTER TABLE leaderboards ADD COLUMN category INTEGER NOT NULL DEFAULT 0;
-- Seconds each period is open for scores; 0: not a tournament.
ALTER TABLE leaderboards ADD COLUMN duration BIGINT NOT NULL DEFAULT 0;
-- Unix seconds; end_time 0: no end.
ALTER TABLE leaderboards ADD COLUMN start_time BIGINT NOT NULL DEFAULT 0;
ALTER TABLE leaderboards ADD COLUMN end_time BIGINT NOT NULL DEFAULT 0;
-- Most records a period may hold (0: no bound), and submissions per record (0: no bound).
ALTER TABLE leaderboards ADD COLUMN max_size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leaderboards ADD COLUMN max_num_score INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leaderboards ADD COLUMN join_required BOOLEAN NOT NULL DEFAULT FALSE;
-- How many records each tournament period holds, claimed one by one before a record is created:
-- the claim's conditional update sees every other claim that committed, however many writers
-- race (a count of the records would see only the statement's snapshot).
CREATE TABLE tournament_sizes (
    leaderboard_id TEXT NOT NULL,
    expiry_time BIGINT NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (leaderboard_id, expiry_time)
);
