-- Chat history: messages sent by sockets that joined their channel with persistence.
-- seq orders a channel's history (insertion order); AUTOINCREMENT never reuses a deleted seq,
-- so a stored cursor never points into a later message.
CREATE TABLE channel_messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    channel_id TEXT NOT NULL,
    code INTEGER NOT NULL,
    sender_id TEXT NOT NULL,
    username TEXT NOT NULL,
    content TEXT NOT NULL,
    create_time_ms BIGINT NOT NULL,
    update_time_ms BIGINT NOT NULL
);
CREATE INDEX channel_messages_channel_seq ON channel_messages (channel_id, seq);
