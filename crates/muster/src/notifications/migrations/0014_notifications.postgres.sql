-- Notifications kept for their user until deleted (Nakama's persistent notifications), listed
-- in the order they were stored (seq).
CREATE TABLE notifications (
    seq BIGSERIAL PRIMARY KEY,
    id UUID NOT NULL UNIQUE,
    user_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    subject TEXT NOT NULL,
    content TEXT NOT NULL,
    code INTEGER NOT NULL,
    -- NULL: sent by the system.
    sender_id UUID,
    create_time_ms BIGINT NOT NULL
);
CREATE INDEX notifications_by_user ON notifications (user_id, seq);
