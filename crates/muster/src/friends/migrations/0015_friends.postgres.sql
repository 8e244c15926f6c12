-- Friends, invites and blocks (Nakama's user_edge): one row per direction; state 0 friend,
-- 1 invite sent, 2 invite received, 3 blocked. Listed by state, then when the edge was made.
CREATE TABLE user_edges (
    source_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    destination_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    state INTEGER NOT NULL,
    position BIGINT NOT NULL,
    update_time_ms BIGINT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (source_id, destination_id)
);
CREATE INDEX user_edges_listing ON user_edges (source_id, state, position, destination_id);
-- An account's deletion finds the edges that point at it.
CREATE INDEX user_edges_destination ON user_edges (destination_id);
