-- A clustered world (crate::world::cluster): each shard is run by one node at a time, the holder
-- of its lease here until expires_at_ms (the database's clock). epoch grows at every change of
-- holder; a released lease has expires_at_ms 0. Unused by a single node.
CREATE TABLE world_shard_leases (
    shard INTEGER PRIMARY KEY,
    holder TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
-- Every term of every shard: who held it from when, until its lease's last expiry or its
-- release. Two terms of one shard never overlap (read by the tests and the console).
CREATE TABLE world_shard_terms (
    shard INTEGER NOT NULL,
    epoch BIGINT NOT NULL,
    holder TEXT NOT NULL,
    started_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    ended_ms BIGINT,
    PRIMARY KEY (shard, epoch)
);
-- The identity of the volume the world's checkpoints and logs live on: a node that sees
-- another (or none) is not on the shared volume and refuses to run the world.
CREATE TABLE world_volume (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    id TEXT NOT NULL
);
