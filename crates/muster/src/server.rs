//! Wiring: build the shared state, serve HTTP and sockets on an already-bound listener until the
//! shutdown future resolves, then shut down in order — stop accepting, close every socket with a
//! close frame, wait for them (bounded by `shutdown_grace_ms`), and flush the store.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::accounts::Accounts;
use crate::config::Config;
use crate::economy::{builtins, Economy, Functions, Rpc};
use crate::metrics::Metrics;
use crate::password::Hasher;
use crate::ratelimit::IpLimit;
use crate::realtime::registry::SessionRegistry;
use crate::store::{self, StartingGrant, Store};
use crate::tokens::TokenService;

/// Everything handlers share; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    pub tokens: Arc<TokenService>,
    pub accounts: Arc<Accounts>,
    pub metrics: Arc<Metrics>,
    pub registry: Arc<SessionRegistry>,
    /// Server functions (and, through them, wallets and inventories).
    pub rpc: Arc<Rpc>,
    pub auth_limit: Arc<IpLimit>,
    pub connect_limit: Arc<IpLimit>,
    /// Cancelled when the server begins shutting down; every socket task watches it.
    pub shutdown: CancellationToken,
    /// Tracks socket tasks, so shutdown knows when every socket has closed.
    pub sockets: TaskTracker,
}

impl AppState {
    pub async fn build(config: Config) -> anyhow::Result<AppState> {
        AppState::build_with(config, Functions::new()).await
    }

    /// Builds the state with a game's own server functions added to the built-ins.
    pub async fn build_with(config: Config, mut functions: Functions) -> anyhow::Result<AppState> {
        let grant = StartingGrant::from_config(&config.economy).map_err(anyhow::Error::msg)?;
        let metrics = Arc::new(Metrics::new());
        let store = store::open(&config, metrics.clone()).await?;
        let tokens = Arc::new(TokenService::new(&config.session, store.clone()).await?);
        let accounts = Arc::new(
            Accounts::new(
                store.clone(),
                tokens.clone(),
                Hasher::new()?,
                metrics.clone(),
            )
            .with_starting_grant(grant),
        );
        builtins::register(&mut functions, &config.runtime.builtin_functions);
        let economy = Arc::new(Economy::new(store.clone(), metrics.clone()));
        let rpc = Arc::new(Rpc::new(functions, economy, metrics.clone()));
        if config.runtime.http_key == crate::config::RuntimeConfig::default().http_key {
            tracing::warn!(
                "runtime.http_key is the default: anyone can call server functions as any user; set your own"
            );
        }
        let limits = &config.limits;
        Ok(AppState {
            auth_limit: Arc::new(IpLimit::new(limits.auth_per_ip_per_sec, limits.auth_burst)),
            connect_limit: Arc::new(IpLimit::new(
                limits.connect_per_ip_per_sec,
                limits.connect_burst,
            )),
            registry: Arc::new(SessionRegistry::new(metrics.clone())),
            rpc,
            config: Arc::new(config),
            store,
            tokens,
            accounts,
            metrics,
            shutdown: CancellationToken::new(),
            sockets: TaskTracker::new(),
        })
    }
}

/// Serves on `listener` until `shutdown` resolves, then shuts down gracefully.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    run_with(listener, config, Functions::new(), shutdown).await
}

/// [`run`] with a game's own server functions (see [`crate::economy::functions`]).
pub async fn run_with(
    listener: TcpListener,
    config: Config,
    functions: Functions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let state = AppState::build_with(config, functions).await?;
    let grace = state.config.shutdown_grace();
    let app = crate::api::router(state.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let cancel = state.shutdown.clone();
    let signal = async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections; closing sockets");
        cancel.cancel();
    };
    let housekeeping = tokio::spawn(housekeeping(state.clone()));
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
    serve_with(config, Functions::new()).await
}

/// [`serve`] with a game's own server functions: what a game's own `main` calls.
pub async fn serve_with(config: Config, functions: Functions) -> anyhow::Result<()> {
    let listener = TcpListener::bind(&config.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.listen))?;
    tracing::info!(address = %listener.local_addr()?, "muster listening (HTTP /v2, WebSocket /ws, /metrics)");
    run_with(listener, config, functions, termination()).await
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
