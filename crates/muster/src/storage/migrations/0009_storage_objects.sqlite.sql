-- Storage objects (crates/muster/src/storage): a game's own data, keyed by collection, key and
-- owner (the nil id for objects the system owns), with Nakama's permissions and versions.
CREATE TABLE storage (
    collection TEXT NOT NULL,
    key TEXT NOT NULL,
    user_id TEXT NOT NULL,
    -- A JSON object, as the client wrote it; its version is the MD5 of this text, in hex.
    value TEXT NOT NULL,
    version TEXT NOT NULL,
    -- 0 server only, 1 the owner, 2 everyone; write: 0 server only, 1 the owner.
    read INTEGER NOT NULL,
    write INTEGER NOT NULL,
    create_time_ms INTEGER NOT NULL,
    update_time_ms INTEGER NOT NULL,
    PRIMARY KEY (collection, key, user_id)
);
-- Listings: a collection by read permission, key and owner; one owner's by read and key.
CREATE INDEX storage_listing ON storage (collection, read, key, user_id);
CREATE INDEX storage_owner_listing ON storage (collection, user_id, read, key);
-- Each owner's objects are counted against `storage.max_objects_per_user`.
CREATE INDEX storage_owner ON storage (user_id);
