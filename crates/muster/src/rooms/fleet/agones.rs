//! Rooms past one machine: game servers allocated from an Agones fleet through Agones'
//! allocator service (its published `allocation.proto`, gRPC over mutual TLS). A room create of
//! a `[fleet.agones.NAME]` kind asks the allocator for a Ready GameServer carrying the kind's
//! labels, passes the room to it as annotations (`muster.dev/room-id`, `muster.dev/capacity`,
//! `muster.dev/param.NAME` — what a process of the local fleet reads from its SDK), and gives
//! players the allocated address and port. The game server checks tickets with
//! `POST /v2/rooms/{id}/tickets/verify` and ends its room through its own Agones SDK (Shutdown):
//! Agones, not Muster, owns its life, so Muster keeps the room's record for `room_ttl_s`.

use std::collections::HashMap;
use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::matches::error::MatchError;
use crate::rooms::fleet::config::AgonesConfig;

/// The allocator's messages and client (and server, for the contract tests), generated from
/// `proto/agones/allocation.proto`.
pub mod proto {
    tonic::include_proto!("allocation");
}

use proto::allocation_service_client::AllocationServiceClient;
use proto::{AllocationRequest, GameServerSelector, MetaPatch};

/// Where an allocated game server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub game_server: String,
    pub address: String,
    pub port: u16,
}

/// One kind's allocator client.
pub struct Allocator {
    name: String,
    config: AgonesConfig,
    client: AllocationServiceClient<Channel>,
}

impl Allocator {
    /// A client of the allocator `config` names, presenting its client certificate and
    /// checking the allocator's against its CA. Connects lazily: a create finds out.
    pub fn new(name: &str, config: &AgonesConfig) -> anyhow::Result<Allocator> {
        let read = |what: &str, path: &str| {
            std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("fleet.agones.{name}.{what} {path:?}: {e}"))
        };
        let identity = Identity::from_pem(
            read("client_cert", &config.client_cert)?,
            read("client_key", &config.client_key)?,
        );
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read("ca_cert", &config.ca_cert)?))
            .identity(identity);
        if !config.tls_server_name.is_empty() {
            tls = tls.domain_name(config.tls_server_name.clone());
        }
        let endpoint = Endpoint::from_shared(config.allocator.clone())
            .map_err(|e| anyhow::anyhow!("fleet.agones.{name}.allocator: {e}"))?
            .tls_config(tls)
            .map_err(|e| anyhow::anyhow!("fleet.agones.{name}: TLS: {e}"))?
            .connect_timeout(Duration::from_millis(config.timeout_ms))
            .timeout(Duration::from_millis(config.timeout_ms));
        Ok(Allocator {
            name: name.to_string(),
            config: config.clone(),
            client: AllocationServiceClient::new(endpoint.connect_lazy()),
        })
    }

    /// Allocates a GameServer for room `room_id`.
    pub async fn allocate(
        &self,
        room_id: &str,
        capacity: u32,
        params: &HashMap<String, String>,
    ) -> Result<Allocation, MatchError> {
        let mut annotations: HashMap<String, String> = params
            .iter()
            .map(|(k, v)| (format!("muster.dev/param.{k}"), v.clone()))
            .collect();
        annotations.insert("muster.dev/room-id".into(), room_id.to_string());
        annotations.insert("muster.dev/capacity".into(), capacity.to_string());
        let request = AllocationRequest {
            namespace: self.config.namespace.clone(),
            game_server_selectors: vec![GameServerSelector {
                match_labels: self.config.match_labels.clone().into_iter().collect(),
                ..Default::default()
            }],
            metadata: Some(MetaPatch {
                labels: HashMap::new(),
                annotations,
            }),
            ..Default::default()
        };
        let answer = self
            .client
            .clone()
            .allocate(request)
            .await
            .map_err(|status| {
                tracing::warn!(kind = self.name, code = ?status.code(), message = status.message(), "fleet: Agones allocation failed");
                match status.code() {
                    // Agones answers ResourceExhausted when no GameServer is Ready.
                    tonic::Code::ResourceExhausted => MatchError::Rejected(format!(
                        "No '{}' game server is ready in the Agones fleet; try again.",
                        self.name
                    )),
                    _ => MatchError::Rejected(format!(
                        "The Agones allocator did not allocate a '{}' game server: {}",
                        self.name,
                        status.message()
                    )),
                }
            })?
            .into_inner();
        let port = answer
            .ports
            .iter()
            .find(|p| self.config.port_name.is_empty() || p.name == self.config.port_name)
            .and_then(|p| u16::try_from(p.port).ok())
            .ok_or_else(|| {
                MatchError::Rejected(format!(
                    "The allocated game server has no port {:?}.",
                    self.config.port_name
                ))
            })?;
        Ok(Allocation {
            game_server: answer.game_server_name,
            address: answer.address,
            port,
        })
    }
}
