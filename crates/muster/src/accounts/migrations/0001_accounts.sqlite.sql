-- Accounts, their login identifiers, revoked tokens and generated secrets.
CREATE TABLE users (
    id TEXT PRIMARY KEY NOT NULL,
    username TEXT NOT NULL UNIQUE,
    display_name TEXT NOT NULL DEFAULT '',
    avatar_url TEXT NOT NULL DEFAULT '',
    lang_tag TEXT NOT NULL DEFAULT 'en',
    location TEXT NOT NULL DEFAULT '',
    timezone TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    email TEXT UNIQUE,
    password_hash TEXT,
    custom_id TEXT UNIQUE,
    disable_time_ms BIGINT,
    create_time_ms BIGINT NOT NULL,
    update_time_ms BIGINT NOT NULL
);

CREATE TABLE user_devices (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE
);
CREATE INDEX user_devices_user_id ON user_devices (user_id);

CREATE TABLE revoked_tokens (
    token_id TEXT PRIMARY KEY NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE TABLE secrets (
    name TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
