//! The HTTP listener: accepts connections and serves each with hyper's HTTP/1, bounded so that
//! no client can hold a node's file descriptors:
//!
//! - a request head must arrive within `limits.header_read_timeout_ms`, from the connection's
//!   start or from the previous answer, so silent connections, slow heads and idle keep-alive
//!   connections are all closed on time (hyper's header read timer; axum's own `serve` offers no
//!   such setting, which is why this loop exists);
//! - connections per client IP and in total are capped at accept ([`ConnectionCounter`]): past
//!   a cap the connection is closed at once, so the accept queue keeps moving and other clients
//!   get in;
//! - an accept that fails for want of file descriptors backs off instead of spinning.
//!
//! Requests then reach the axum router with the client's address as `ConnectInfo`, exactly as
//! `axum::serve` would hand them over, and upgrades (the WebSocket) work as before.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use super::connection::accept_backoff;
use super::connections::{ConnectionCounter, Held};
use crate::base::metrics::Metrics;

/// What the listener needs besides the router.
pub struct HttpEdge {
    pub counter: Arc<ConnectionCounter>,
    pub header_read_timeout: Duration,
    pub metrics: Arc<Metrics>,
}

/// Accepts and serves connections until `stop` is cancelled, then returns the tracker of the
/// connections still finishing their requests (each is told to close once its request is
/// answered; the caller bounds the wait).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    edge: HttpEdge,
    stop: CancellationToken,
) -> TaskTracker {
    let connections = TaskTracker::new();
    let mut failures = 0u32;
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => {
                connections.close();
                return connections;
            }
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                failures = 0;
                accepted
            }
            Err(error) => {
                failures += 1;
                accept_backoff(&error, failures).await;
                continue;
            }
        };
        // Over a cap: dropping the stream closes it at once (the counter counts the refusal).
        let Ok(held) = edge.counter.admit(peer.ip()) else {
            continue;
        };
        serve_one(stream, peer, app.clone(), &edge, &connections, &stop, held);
    }
}

fn serve_one(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    edge: &HttpEdge,
    connections: &TaskTracker,
    stop: &CancellationToken,
    held: Held,
) {
    // A realtime server writes small frames back to back (a chat message, then its ack);
    // Nagle's algorithm would hold the second until the peer's delayed ACK, up to 40 ms later.
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY");
    }
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        app.clone().oneshot(request)
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(edge.header_read_timeout)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    let metrics = edge.metrics.clone();
    let stop = stop.clone();
    metrics.http_connections_open.inc();
    connections.spawn(async move {
        tokio::pin!(connection);
        let ended = tokio::select! {
            ended = connection.as_mut() => ended,
            () = stop.cancelled() => {
                // Shutting down: answer the request in progress, then close.
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        };
        let reason = match ended {
            Ok(()) => "closed",
            Err(error) if error.is_timeout() => "header_timeout",
            Err(error) => {
                tracing::debug!(%error, "HTTP connection ended with an error");
                "error"
            }
        };
        drop(held);
        metrics.http_connections_open.dec();
        metrics
            .http_connections_closed
            .with_label_values(&[reason])
            .inc();
    });
}
