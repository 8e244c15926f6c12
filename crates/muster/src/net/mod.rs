//! Transports and edges: everything that knows about HTTP, WebSocket and TCP bytes.
//!
//! - [`listener`]: the HTTP accept loop, with the edge's timeouts and connection caps
//!   ([`connections::ConnectionCounter`]);
//! - [`calls`]: Nakama's API calls, their names and REST bindings, for every edge that serves
//!   them;
//! - [`grpc`]: the gRPC edge: Nakama's `nakama.api.Nakama` service, each call transcoded onto
//!   its REST binding and served by the same routes;
//! - [`http`]: Nakama's `/v2` routes, one file per resource, one auth extractor, one error type;
//! - [`ws_upgrade`] + [`ws`]: the realtime socket over WebSocket (checked before the upgrade,
//!   then one task per socket);
//! - [`links`]: the invite-link shortener's routes, served on a listener of their own;
//! - [`tcp`]: the native TCP transport (length-delimited protobuf envelopes) for rooms and matches;
//! - [`link`]: a WebSocket's or native TCP connection's writing side, which the senders of a
//!   message write to directly when the connection's task is not writing;
//! - [`dispatch`]: one decoded envelope in, at most one reply out, for every transport; a
//!   domain's error becomes an error envelope there.

pub mod calls;
pub mod connection;
pub mod connections;
pub mod console;
pub mod dispatch;
pub mod enet;
pub mod fleet_sdk;
pub mod graphql;
pub mod grpc;
pub mod http;
pub mod link;
pub mod links;
pub mod listener;
pub mod rt_hooks;
pub mod state;
pub mod tcp;
pub mod ws;
pub mod ws_upgrade;
