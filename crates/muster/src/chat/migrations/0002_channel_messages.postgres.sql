-- Chat history: messages sent by sockets that joined their channel with persistence.
-- seq orders a channel's history (insertion order).
CREATE TABLE channel_messages (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id UUID NOT NULL,
    channel_id TEXT NOT NULL,
    code INTEGER NOT NULL,
    sender_id UUID NOT NULL,
    username TEXT NOT NULL,
    content TEXT NOT NULL,
    create_time_ms BIGINT NOT NULL,
    update_time_ms BIGINT NOT NULL,
    CONSTRAINT channel_messages_id_key UNIQUE (id)
);
CREATE INDEX channel_messages_channel_seq ON channel_messages (channel_id, seq);
