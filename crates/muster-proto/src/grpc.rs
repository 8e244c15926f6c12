//! The gRPC surface: the part of Nakama's client API (package `nakama.api`, service `Nakama`)
//! that Muster serves, generated at build time from `proto/nakama/api.proto` (a rendering of
//! Nakama's own protos, checked against them by the test `grpc_surface`).
//!
//! - every message, as prost types with serde in protobuf's JSON mapping under proto field
//!   names (what Nakama's REST gateway writes), unknown fields ignored when read;
//! - [`nakama_server`]: the service's server (tonic); [`nakama_client`]: its client;
//! - [`FILE_DESCRIPTOR_SET`]: the service's descriptors, for reflection.

#![allow(clippy::all, missing_docs, rustdoc::all)]

include!(concat!(env!("OUT_DIR"), "/nakama.api.rs"));
include!(concat!(env!("OUT_DIR"), "/nakama.api.serde.rs"));

/// The encoded `FileDescriptorSet` of `nakama/api.proto` (for gRPC reflection).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/nakama_api_descriptor.bin"));
