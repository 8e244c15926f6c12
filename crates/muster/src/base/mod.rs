//! The bottom layer: what every other layer may use and which uses nothing of Muster's.
//!
//! - [`config`]: the typed configuration tree, its documentation and its layering (file → env → flags);
//! - [`metrics`]: the Prometheus registry and the server-wide metrics;
//! - [`clock`]: wall-clock seconds for tokens and records;
//! - [`ratelimit`]: per-IP token buckets at the edge;
//! - [`client_ip`]: which address a request counts against (trusted proxies, IPv6 per /64).

pub mod client_ip;
pub mod clock;
pub mod config;
pub mod metrics;
pub mod ratelimit;
