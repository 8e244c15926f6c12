-- The operator's console (crates/muster/src/console): its users, their logins and the audit log
-- of every change made through it.
CREATE TABLE console_users (
    username TEXT PRIMARY KEY,
    password_hash TEXT NOT NULL,
    -- admin, developer or readonly.
    role TEXT NOT NULL,
    create_time_ms BIGINT NOT NULL
);
CREATE TABLE console_sessions (
    -- Hex SHA-256 of the session cookie's token (the token itself is never stored).
    token_hash TEXT PRIMARY KEY,
    username TEXT NOT NULL REFERENCES console_users (username) ON DELETE CASCADE,
    csrf TEXT NOT NULL,
    create_time_ms BIGINT NOT NULL,
    expire_time_ms BIGINT NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expire_time_ms);
CREATE INDEX console_sessions_user ON console_sessions (username);
CREATE TABLE console_audit (
    id BIGSERIAL PRIMARY KEY,
    time_ms BIGINT NOT NULL,
    username TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL
);
-- The console's player search: by the start of a username or display name, in any case
-- (byte order, so that a prefix is a range of the index).
CREATE INDEX users_username_lower ON users ((lower(username)) COLLATE "C");
CREATE INDEX users_display_name_lower ON users ((lower(display_name)) COLLATE "C");
