//! The gRPC edge: Nakama's client API as the service `nakama.api.Nakama` (the native iOS,
//! Android, Flutter and C++ clients, and server-to-server calls), beside the REST API.
//!
//! Each call is transcoded onto its REST binding ([`transcode`]) and served by the API's own
//! router, in process: the same authentication (the server key as HTTP Basic for the
//! authenticate calls, `authorization: Bearer <session>` metadata otherwise, the HTTP key for
//! RPCs), the same module hooks, limits, errors, metrics (labelled `transport="grpc"`) and logs —
//! a gRPC call and a REST call of the same request get the same answer. Nakama's gateway does
//! the same the other way round. A call the service does not serve answers `UNIMPLEMENTED`
//! naming it ([`unserved`]).
//!
//! Connections are held to the HTTP edge's caps (one [`ConnectionCounter`] for both), calls to
//! `limits.request_timeout_ms` and `limits.max_request_size_bytes`; idle connections are pinged
//! and dropped when they stop answering. Health (`grpc.health.v1`) and reflection
//! (`grpc.reflection.v1` and `v1alpha`) are served beside it.

mod calls;
mod incoming;
mod transcode;
mod unserved;

use std::time::Duration;

use axum::Router;
use muster_proto::grpc::nakama_server::NakamaServer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::net::state::AppState;

/// Serves the gRPC edge on `listener` until `stop` is cancelled; `api` is the REST API's router
/// that every call is transcoded onto.
pub async fn serve(listener: TcpListener, state: AppState, api: Router, stop: CancellationToken) {
    let config = state.services.config.clone();
    let limits = &config.limits;
    let grpc = &config.grpc;
    let nakama = NakamaServer::new(transcode::Edge::new(api, limits.max_request_size_bytes))
        .max_decoding_message_size(limits.max_request_size_bytes)
        .max_encoding_message_size(usize::MAX);
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<NakamaServer<transcode::Edge>>()
        .await;
    let mut routes = tonic::service::Routes::new(unserved::Named::new(nakama)).add_service(health);
    if grpc.reflection {
        // Both versions of the reflection service: tools still ask either.
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(muster_proto::grpc::FILE_DESCRIPTOR_SET)
        };
        match (reflection().build_v1(), reflection().build_v1alpha()) {
            (Ok(v1), Ok(v1alpha)) => routes = routes.add_service(v1).add_service(v1alpha),
            (Err(error), _) | (_, Err(error)) => {
                tracing::warn!(%error, "gRPC reflection is off: its descriptors do not load")
            }
        }
    }
    let incoming = incoming::admitted(listener, state.connections.clone(), stop.clone());
    let served = tonic::transport::Server::builder()
        .timeout(Duration::from_millis(limits.request_timeout_ms))
        .http2_keepalive_interval(Some(Duration::from_millis(grpc.keepalive_interval_ms)))
        .http2_keepalive_timeout(Some(Duration::from_millis(grpc.keepalive_timeout_ms)))
        .max_concurrent_streams(grpc.max_concurrent_streams)
        .tcp_nodelay(true)
        .add_routes(routes)
        .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
        .await;
    if let Err(error) = served {
        tracing::warn!(%error, "the gRPC edge stopped");
    }
}
