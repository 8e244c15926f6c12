//! The bottom layer: what every other layer may use and which uses nothing of Muster's.
//!
//! - [`names`]: what a name that becomes part of an id or a NATS subject may hold;
//! - [`metrics`]: the Prometheus registry and the server-wide metrics;
//! - [`clock`]: wall-clock seconds for tokens and records;
//! - [`ratelimit`]: per-IP token buckets at the edge;
//! - [`rpc`]: the coded error (a gRPC status code and a message) of Nakama's convention;
//! - [`client_ip`]: which address a request counts against (trusted proxies, IPv6 per /64);
//! - [`http_answer`]: an answer from a server Muster calls, read up to a size bound.

pub mod client_ip;
pub mod clock;
pub mod cursor;
pub mod http_answer;
pub mod metrics;
pub mod names;
pub mod ratelimit;
pub mod rpc;
