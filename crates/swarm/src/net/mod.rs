//! How a player's bytes reach the server: the transports, with no knowledge of steps.
//!
//! - [`transport`]: TCP from the worker's source address and the WebSocket upgrade done by hand
//!   (so an idle socket keeps no handshake buffer);
//! - [`native`]: Muster's native TCP transport (length-delimited protobuf frames).
//!
//! The HTTP calls themselves go through the worker's shared `reqwest` client.

pub mod native;
pub mod transport;
