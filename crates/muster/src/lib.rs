//! Muster: a realtime multiplayer game backend that speaks Nakama's client API.
//!
//! The crate is built in layers; each module only imports the ones below it (rules in
//! `docs/ARCHITECTURE.md`, checked by a test):
//!
//! | layer | modules | job |
//! |---|---|---|
//! | cli | [`cli`] | the command line: settings, logging, runtime, commands ([`cli::main_with`]) |
//! | app | [`app`] | wiring: builds the services and the adapters over them, binds listeners, runs until shutdown |
//! | adapters | `net`, [`functions`], `runtime` | how the outside reaches the services: the HTTP API and the realtime socket, the console's and the links' pages; server functions; a game's JavaScript module |
//! | services | [`services`] | [`services::Services`], every domain's service built once; [`services::Stores`], one database seen through each slice's store |
//! | config | [`config`] | the root [`config::Config`] and the edge's sections |
//! | domains | [`accounts`], [`economy`], [`storage`], [`leaderboards`], [`friends`], [`groups`], [`notifications`], [`status`], [`parties`], [`chat`], [`matches`](mod@matches), [`rooms`], [`links`], [`world`], [`console`] | the slices: each one's rules, store on both engines, migrations, settings and messages to other nodes; no HTTP, no wire errors |
//! | cluster | `cluster` | the router: deliver to sessions, users, channel members wherever they live; the one node-to-node protocol |
//! | session | `session` | registry, bounded outboxes, encode-once fanout |
//! | store | [`store`] | the engines' plumbing: SQLite and PostgreSQL connections and group-commit writers, the migration runner, the error type |
//! | base | [`base`] | metrics, clock, rate limits, names, the coded error |
//!
//! What a studio uses is public: server functions ([`functions`]), match handlers
//! ([`matches::handler`]), the configuration ([`config`]), the services and their stores
//! ([`services`]), the app builder ([`app`], [`cli::main_with`]).
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
pub mod leaderboards;
pub mod links;
pub mod matches;
pub(crate) mod net;
pub mod notifications;
pub mod parties;
pub mod purchases;
pub mod rooms;
pub(crate) mod runtime;
pub mod services;
pub(crate) mod session;
pub mod status;
pub mod storage;
pub mod store;
pub mod streams;
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
