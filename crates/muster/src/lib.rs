//! Muster: a realtime multiplayer game backend that speaks Nakama's client API.
//!
//! The crate is built in layers; each module only imports the ones below it (checked by
//! `scripts/check-layers`, rules in `docs/ARCHITECTURE.md`):
//!
//! | layer | modules | job |
//! |---|---|---|
//! | app | [`app`] | wiring: build the services, bind listeners, run until shutdown |
//! | net | [`net`] | transports and edges: HTTP routes, WebSocket, native TCP, connection lifecycle, dispatch |
//! | domains | [`accounts`], [`chat`], [`matches`](mod@matches), [`economy`], [`functions`], [`links`], [`fleet`], [`world`] | the rules; no HTTP, no wire errors |
//! | cluster | [`cluster`] | the router: deliver to sessions, users, channel members wherever they live |
//! | session | [`session`] | registry, bounded outboxes, encode-once fanout |
//! | store | [`store`] | persistence behind traits, SQLite and PostgreSQL |
//! | base | [`base`] | configuration, metrics, clock, rate limits |
//!
//! [`app::run`] wires them on an already-bound listener with a shutdown future, so tests and the
//! binary start the same server.

pub mod accounts;
pub mod app;
pub mod base;
pub mod chat;
pub mod cluster;
pub mod economy;
pub mod fleet;
pub mod functions;
pub mod leaderboards;
pub mod links;
pub mod matches;
pub mod net;
pub mod session;
pub mod storage;
pub mod store;
pub mod world;
