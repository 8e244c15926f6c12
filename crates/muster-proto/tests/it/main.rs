//! muster-proto's tests against Nakama's published protos (fetched by the test command):
//! the REST bodies' and realtime envelopes' fields ([`bodies`]) and the gRPC surface's rendering
//! ([`grpc_surface`]).

mod bodies;
mod grpc_surface;
