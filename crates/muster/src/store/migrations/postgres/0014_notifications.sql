-- Notifications kept for their user until deleted (Nakama's persistent notifications), read
-- oldest first.
CREATE TABLE notifications (
    id UUID PRIMARY KEY NOT NULL,
    user_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    subject TEXT NOT NULL,
    content TEXT NOT NULL,
    code INTEGER NOT NULL,
    -- NULL: sent by the system.
    sender_id UUID,
    create_time_ms BIGINT NOT NULL
);
CREATE INDEX notifications_by_user ON notifications (user_id, create_time_ms, id);
