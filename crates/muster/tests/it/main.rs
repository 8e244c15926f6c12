//! Muster's integration tests, one binary: each module drives a real server (in-process, or
//! the built binary as a process) over real sockets. `support` is what they share.
//!
//! Tests that need PostgreSQL, NATS or a FUSE disk are marked `#[ignore]` with what they need,
//! so a plain `cargo test` reports them as ignored; `scripts/test` provides those services and
//! runs them with `--include-ignored`, and one that is run without its service fails.

#[macro_use]
mod support;

mod accounts;
mod autoscale;
mod channels;
mod cluster;
mod console;
mod data_durability;
mod economy;
mod economy_durability;
mod edge;
mod enet;
mod fleet;
mod friends;
mod gateway;
mod group_commit;
mod groups;
mod grpc;
mod layering;
mod leaderboard_schedule;
mod leaderboards;
mod lifecycle;
mod links;
mod matches;
mod matchmaker;
mod notifications;
mod power_cut;
mod providers;
mod purchases;
mod quotas;
mod realtime;
mod rooms;
mod runtime;
mod slow_consumer;
mod storage;
mod tournaments;
mod world;
