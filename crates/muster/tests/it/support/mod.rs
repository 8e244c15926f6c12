//! What every integration test shares, each part once:
//!
//! - [`server`]: the in-process server on SQLite or PostgreSQL (`TestServer`, `Database`,
//!   `on_both_backends!`), with a clock the test moves instead of sleeping;
//! - [`client`]: the JSON WebSocket client and the native TCP client;
//! - [`enet`]: an ENet client (rusty_enet) and a lossy UDP relay;
//! - [`metrics`]: one metric read from `/metrics`;
//! - [`crash`]: the real binary as a process, to `kill -9` and restart;
//! - [`stores`]: stand-ins for the app stores' servers (purchase validation).
//!

pub mod client;
pub mod crash;
pub mod enet;
pub mod metrics;
pub mod postgres;
pub mod providers;
#[macro_use]
pub mod server;
pub mod stores;
pub mod wait;

pub use client::{next_json, Client};
pub use crash::{cluster_node_command, free_port, muster_command, Binary};
pub use metrics::{metric, metric_at};
pub use postgres::PrivatePostgres;
pub use server::*;
pub use wait::{eventually, eventually_within, Wait, EVENTUALLY};
