//! Muster's wire types, usable on their own by clients, load generators and tools.
//!
//! - [`api`]: the JSON bodies of the Nakama-compatible REST API under `/v2`.
//! - [`realtime`]: the realtime envelope carried over the WebSocket, in both of Nakama's formats
//!   (JSON text frames and protobuf binary frames), with decoders that never panic on input.
//! - [`wire`]: protobuf's JSON conventions (int64 as strings, base64 bytes, RFC 3339 times).
//! - [`frame`]: the native TCP transport's framing (length-delimited protobuf envelopes).
//! - [`arena`]: payloads of the built-in authoritative example game.
//! - [`grpc`]: the gRPC surface: the part of Nakama's `nakama.api.Nakama` service Muster serves,
//!   its messages (protobuf, and their protobuf-JSON mapping), server and client.

pub mod api;
pub mod arena;
pub mod frame;
pub mod grpc;
pub mod realtime;
pub mod wire;
