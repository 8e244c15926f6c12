//! Muster: a realtime multiplayer game backend that speaks Nakama's client API.
//!
//! The crate is built in layers; each module only imports the ones below it (rules in
//! `docs/ARCHITECTURE.md`):
//!
//! | layer | modules | job |
//! |---|---|---|
//! | cli | [`cli`] | the command line: settings, logging, runtime, commands ([`cli::main_with`]) |
//! | app | [`app`] | wiring: build the services, bind listeners, run until shutdown |
//! | net | `net` | transports and edges: HTTP routes, WebSocket, native TCP, connection lifecycle, dispatch |
//! | domains | [`accounts`], [`chat`], [`matches`](mod@matches), [`economy`], [`functions`], [`links`], [`rooms`], [`world`] | the rules; no HTTP, no wire errors |
//! | cluster | `cluster` | the router: deliver to sessions, users, channel members wherever they live |
//! | session | `session` | registry, bounded outboxes, encode-once fanout |
//! | store | [`store`] | persistence behind traits, SQLite and PostgreSQL |
//! | base | [`base`] | configuration, metrics, clock, rate limits |
//!
//! [`app::run`] wires them on an already-bound listener with a shutdown future, so tests and the
//! binary start the same server.

pub mod accounts;
pub mod app;
pub mod base;
pub mod chat;
pub mod cli;
pub(crate) mod cluster;
pub mod config;
pub mod console;
pub mod economy;
pub mod friends;
pub mod functions;
pub mod groups;
pub(crate) mod js;
pub mod leaderboards;
pub mod links;
pub mod matches;
pub(crate) mod net;
pub mod notifications;
pub mod parties;
pub mod rooms;
pub mod services;
pub(crate) mod session;
pub mod status;
pub mod storage;
pub mod store;
pub mod world;

/// jemalloc rather than glibc's malloc: a durable write is allocated on a socket's task and freed
/// on the database writer thread, and its answer the other way round, which glibc serves from its
/// locked slow path (~4 µs of CPU per economy call). jemalloc cost 4.6 µs less per call at
/// 20,000 calls/s and 2 % more memory for 18,000 idle sockets (bench/RESULTS.md). In the library,
/// so that a studio's own binary gets it too; the `jemalloc` feature (on by default) turns it off.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The README's and the docs' Rust snippets, compiled by the doctests (`cargo test --doc`), so
/// that what they show always builds against this crate. Code blocks that are not Rust are
/// labelled with their language; `tests/doc_snippets.rs` checks the shell, TOML and JSON ones.
#[cfg(doctest)]
mod doc_snippets {
    #[doc = include_str!("../../../README.md")]
    struct Readme;
    #[doc = include_str!("../../../docs/extending.md")]
    struct Extending;
    #[doc = include_str!("../../../docs/leaderboards.md")]
    struct Leaderboards;
    #[doc = include_str!("../../../docs/matches.md")]
    struct Matches;
    #[doc = include_str!("../../../docs/storage-objects.md")]
    struct StorageObjects;
}
