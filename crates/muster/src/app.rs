//! Wiring: build the shared state ([`crate::state`]), serve HTTP and sockets on an already-bound listener until the
//! shutdown future resolves, then shut down in order — stop accepting, close every socket with a
//! close frame, wait for them (bounded by `shutdown_grace_ms`), and flush the store.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::time::Duration;

use axum::serve::ListenerExt as _;
use tokio::net::TcpListener;

use crate::base::config::Config;
pub use crate::state::{AppState, GameLogic};

/// Serves on `listener` until `shutdown` resolves, then shuts down gracefully.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    run_with(listener, config, GameLogic::default(), shutdown).await
}

/// [`run`] with a game's own logic: authoritative match handlers (see
/// [`crate::matches::handler`]) and server functions (see [`crate::economy::functions`]).
pub async fn run_with(
    listener: TcpListener,
    config: Config,
    game: GameLogic,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let state = AppState::build_with(config, game).await?;
    state.matches.start();
    if !state.config.rooms.tcp_listen.is_empty() {
        let address = &state.config.rooms.tcp_listen;
        let tcp = TcpListener::bind(address)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {address} (rooms.tcp_listen): {e}"))?;
        let bound = tcp.local_addr()?;
        state.matches.set_tcp_addr(bound);
        tracing::info!(address = %bound, "native TCP transport listening");
        tokio::spawn(crate::net::tcp::serve(tcp, state.clone()));
    }
    let grace = state.config.shutdown_grace();
    let app =
        crate::net::http::router(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let cancel = state.shutdown.clone();
    let signal = async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections; closing sockets");
        cancel.cancel();
    };
    let housekeeping = tokio::spawn(housekeeping(state.clone()));
    // TCP_NODELAY on every connection: a realtime server writes small frames back to back (a
    // chat message, then its ack), and Nagle's algorithm would hold the second one until the
    // peer's delayed ACK, up to 40 ms later.
    let listener = listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
    });
    let server = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(signal)
            .into_future(),
    );

    state.shutdown.cancelled().await;
    // In-flight HTTP requests and socket closes share one grace period.
    let deadline = tokio::time::Instant::now() + grace;
    match tokio::time::timeout_at(deadline, server).await {
        Ok(Ok(Err(error))) => tracing::error!(%error, "HTTP server error"),
        Ok(Err(error)) => tracing::error!(%error, "HTTP server task failed"),
        Err(_) => {
            tracing::warn!("HTTP requests still running after the grace period; dropping them")
        }
        Ok(Ok(Ok(()))) => {}
    }
    state.sockets.close();
    if tokio::time::timeout_at(deadline, state.sockets.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = state.registry.sockets(),
            "sockets still open after the grace period"
        );
    }
    housekeeping.abort();
    state.store.close().await;
    tracing::info!("shutdown complete");
    Ok(())
}

/// Binds `config.listen` and serves until SIGTERM or SIGINT (the `muster serve` command).
pub async fn serve(config: Config) -> anyhow::Result<()> {
    serve_with(config, GameLogic::default()).await
}

/// [`serve`] with a game's own logic (match handlers, server functions): what a game's own
/// `main` calls.
pub async fn serve_with(config: Config, game: GameLogic) -> anyhow::Result<()> {
    let listener = TcpListener::bind(&config.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
    tracing::info!(address = %listener.local_addr()?, "muster listening (HTTP /v2, WebSocket /ws, /metrics)");
    run_with(listener, config, game, termination()).await
}

/// Resolves on SIGTERM or SIGINT.
async fn termination() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

/// Periodic upkeep that keeps bounded maps bounded.
async fn housekeeping(state: AppState) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    tick.tick().await;
    loop {
        tick.tick().await;
        state.auth_limit.prune();
        state.connect_limit.prune();
        if let Err(error) = state.tokens.reload_revocations().await {
            tracing::warn!(%error, "pruning revoked tokens failed");
        }
    }
}

/// Logs to stderr with `filter` (overridden by RUST_LOG when set).
pub fn init_logging(filter: &str) {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| filter.to_owned());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .try_init();
}
