-- Notifications kept for their user until deleted (Nakama's persistent notifications), listed
-- in the order they were stored: seq only grows (AUTOINCREMENT never reuses a deleted row's), so
-- a cursor's position never hides a later notification.
CREATE TABLE notifications (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    subject TEXT NOT NULL,
    content TEXT NOT NULL,
    code INTEGER NOT NULL,
    -- NULL: sent by the system.
    sender_id TEXT,
    create_time_ms BIGINT NOT NULL
);
CREATE INDEX notifications_by_user ON notifications (user_id, seq);
