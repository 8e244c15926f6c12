//! Muster: a realtime multiplayer game backend that speaks Nakama's client API.
//!
//! A request travels one way through the crate: [`api`] (HTTP handlers) and [`realtime`]
//! (WebSocket sessions) parse and answer; [`accounts`] and [`economy`] hold the rules; [`store`]
//! persists.
//! [`server::run`] wires them on an already-bound listener with a shutdown future, so tests and
//! the binary start the same server.

pub mod accounts;
pub mod api;
pub mod config;
pub mod economy;
pub mod error;
pub mod matches;
pub mod metrics;
pub mod password;
pub mod ratelimit;
pub mod realtime;
pub mod server;
pub mod store;
pub mod time;
pub mod tokens;
