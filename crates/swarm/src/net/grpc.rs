//! Nakama's API over gRPC (`api = "grpc"` on the `authenticate`, `storage` and `leaderboard`
//! steps): the worker's players share a few HTTP/2 connections to the server's gRPC port
//! (Nakama's convention: the HTTP port less one), each call multiplexed as a real client's. A
//! call takes and answers the same JSON as the REST call it stands for — the request and answer
//! messages in protobuf's JSON mapping (proto field names) — so a step reads either the same
//! way.

use std::net::SocketAddr;
use std::time::Duration;

use muster_proto::grpc as api;
use muster_proto::grpc::nakama_client::NakamaClient;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request};

use super::failure::Failure;

/// Connections per worker: a server allows 100 calls in flight on one by default.
const CONNECTIONS: usize = 8;

/// The calls the steps make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcCall {
    AuthenticateDevice,
    WriteStorageObjects,
    ReadStorageObjects,
    WriteLeaderboardRecord,
    ListLeaderboardRecordsAroundOwner,
}

/// The worker's gRPC connections, opened on first use.
pub struct GrpcClients {
    clients: Vec<NakamaClient<Channel>>,
}

impl GrpcClients {
    /// Clients of the gRPC edge at `addr` (connected lazily, on each one's first call).
    pub fn lazy(addr: SocketAddr) -> GrpcClients {
        let clients = (0..CONNECTIONS)
            .filter_map(|_| Endpoint::from_shared(format!("http://{addr}")).ok())
            .map(|endpoint| {
                NakamaClient::new(
                    endpoint
                        .tcp_nodelay(true)
                        .connect_timeout(Duration::from_secs(10))
                        .connect_lazy(),
                )
            })
            .collect();
        GrpcClients { clients }
    }

    /// Makes `call` with `request` (its message in protobuf's JSON mapping) and `authorization`
    /// metadata, for the player `player` (players are spread over the connections); answers
    /// the answer message in the same mapping.
    pub async fn call(
        &self,
        player: u64,
        call: GrpcCall,
        authorization: &str,
        request: serde_json::Value,
    ) -> Result<Vec<u8>, GrpcFailure> {
        let Some(client) = self
            .clients
            .get(player as usize % self.clients.len().max(1))
        else {
            return Err(GrpcFailure::Connect);
        };
        let mut client = client.clone();
        match call {
            GrpcCall::AuthenticateDevice => {
                let request = typed::<api::AuthenticateDeviceRequest>(request, authorization)?;
                answer(client.authenticate_device(request).await)
            }
            GrpcCall::WriteStorageObjects => {
                let request = typed::<api::WriteStorageObjectsRequest>(request, authorization)?;
                answer(client.write_storage_objects(request).await)
            }
            GrpcCall::ReadStorageObjects => {
                let request = typed::<api::ReadStorageObjectsRequest>(request, authorization)?;
                answer(client.read_storage_objects(request).await)
            }
            GrpcCall::WriteLeaderboardRecord => {
                let request = typed::<api::WriteLeaderboardRecordRequest>(request, authorization)?;
                answer(client.write_leaderboard_record(request).await)
            }
            GrpcCall::ListLeaderboardRecordsAroundOwner => {
                let request =
                    typed::<api::ListLeaderboardRecordsAroundOwnerRequest>(request, authorization)?;
                answer(client.list_leaderboard_records_around_owner(request).await)
            }
        }
    }
}

/// Why a gRPC call failed.
#[derive(Debug)]
pub enum GrpcFailure {
    /// The server answered this status (not OK).
    Status(Code),
    /// No connection could be made.
    Connect,
}

impl GrpcFailure {
    /// The failure's problem, as a step's report names it: `grpc_<code>` (the code's number).
    pub fn problem(&self) -> String {
        match self {
            GrpcFailure::Status(code) => format!("grpc_{}", *code as i32),
            GrpcFailure::Connect => "grpc_connect".into(),
        }
    }

    /// As the failure of the call `call`.
    pub fn of(self, call: &'static str) -> Failure {
        Failure::Call {
            call,
            problem: self.problem(),
        }
    }
}

fn typed<T: DeserializeOwned>(
    request: serde_json::Value,
    authorization: &str,
) -> Result<Request<T>, GrpcFailure> {
    let message: T =
        serde_json::from_value(request).map_err(|_| GrpcFailure::Status(Code::InvalidArgument))?;
    let mut request = Request::new(message);
    let value = MetadataValue::try_from(authorization)
        .map_err(|_| GrpcFailure::Status(Code::InvalidArgument))?;
    request.metadata_mut().insert("authorization", value);
    Ok(request)
}

fn answer<T: Serialize>(
    result: Result<tonic::Response<T>, tonic::Status>,
) -> Result<Vec<u8>, GrpcFailure> {
    match result {
        Ok(response) => {
            serde_json::to_vec(response.get_ref()).map_err(|_| GrpcFailure::Status(Code::Internal))
        }
        Err(status)
            if status.code() == Code::Unavailable && status.message().contains("connect") =>
        {
            Err(GrpcFailure::Connect)
        }
        Err(status) => Err(GrpcFailure::Status(status.code())),
    }
}
