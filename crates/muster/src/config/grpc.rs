//! The `[grpc]` section: Nakama's client API over gRPC (`crate::net::grpc`), for the native
//! clients (nakama-java, nakama-swift, nakama-dart, nakama-cpp) and server-to-server calls. Its
//! requests are held to the same `[limits]` as the REST API's: the largest request
//! (`max_request_size_bytes`), the time a call may take (`request_timeout_ms`), the
//! connections one address and the node may hold (`max_connections_per_ip`,
//! `max_connections`) and the per-address rates.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpcConfig {
    /// TCP address of the gRPC listener (Nakama's port is the HTTP port less one); empty
    /// disables it.
    pub listen: String,
    /// How often an idle connection is pinged (HTTP/2 PING), in ms; a client that does not
    /// answer within `keepalive_timeout_ms` is disconnected, so dead clients free their slot.
    pub keepalive_interval_ms: u64,
    /// How long a ping's answer may take, in ms.
    pub keepalive_timeout_ms: u64,
    /// Calls one connection may have in flight at once (HTTP/2 streams).
    pub max_concurrent_streams: u32,
    /// Serve gRPC reflection (`grpc.reflection.v1`), so tools such as `grpcurl` list and call
    /// the service without its protos.
    pub reflection: bool,
}

impl Default for GrpcConfig {
    fn default() -> Self {
        GrpcConfig {
            listen: "0.0.0.0:7349".into(),
            keepalive_interval_ms: 30_000,
            keepalive_timeout_ms: 10_000,
            max_concurrent_streams: 100,
            reflection: true,
        }
    }
}

impl GrpcConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !self.listen.is_empty() && self.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(format!(
                "grpc.listen must be an IP:port address or empty, not {:?}",
                self.listen
            ));
        }
        if !(1_000..=3_600_000).contains(&self.keepalive_interval_ms) {
            return Err("grpc.keepalive_interval_ms must be between 1000 and 3600000".into());
        }
        if !(100..=600_000).contains(&self.keepalive_timeout_ms) {
            return Err("grpc.keepalive_timeout_ms must be between 100 and 600000".into());
        }
        if !(1..=10_000).contains(&self.max_concurrent_streams) {
            return Err("grpc.max_concurrent_streams must be between 1 and 10000".into());
        }
        Ok(())
    }
}
