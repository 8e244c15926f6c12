//! How a player's bytes reach the server: the transports, with no knowledge of steps.
//!
//! - [`transport`]: TCP from the worker's source address and the WebSocket upgrade done by hand
//!   (so an idle socket keeps no handshake buffer);
//! - [`native`]: Muster's native TCP transport (length-delimited protobuf frames);
//! - [`lines`]: a line-based game server's TCP connection (a studio's own server run as a
//!   process room, e.g. `clients/fleet-server/relay.py`);
//! - [`enet`]: Muster's ENet transport (reliable UDP), the worker's players sharing a few hosts;
//! - [`grpc`]: Nakama's API over gRPC, for the steps run with `api = "grpc"`;
//! - [`failure`]: why a player failed, the kinds the report counts, and how transport errors
//!   map onto them.
//!
//! The HTTP calls themselves go through the worker's shared `reqwest` client.

pub mod enet;
pub mod failure;
pub mod grpc;
pub mod lines;
pub mod native;
pub mod transport;
