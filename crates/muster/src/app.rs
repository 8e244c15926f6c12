//! Wiring: build the services and the handlers' shared state ([`AppState`]), serve HTTP and
//! sockets on an already-bound listener until the shutdown future resolves, then shut down in order — stop accepting, close every socket with a
//! close frame, wait for them (bounded by `shutdown_grace_ms`), and flush the store.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UdpSocket};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::base::clock::Clock;
use crate::base::ratelimit::IpLimit;
use crate::config::{Config, RuntimeConfig};
use crate::functions::{builtins, Functions, Rpc};
use crate::matches::handler::Handlers;
use crate::net::connections::ConnectionCounter;
use crate::net::listener::{self, HttpEdge};
pub use crate::net::state::{AppState, Shared};
use crate::services::Services;

/// What a game adds to Muster in Rust: its authoritative match handlers and its server
/// functions. The default has the built-in handlers (`arena`) and no functions of its own (the
/// built-in functions are registered from `runtime.builtin_functions`).
pub struct GameLogic {
    pub handlers: Handlers,
    pub functions: Functions,
}

impl Default for GameLogic {
    fn default() -> Self {
        GameLogic {
            handlers: Handlers::builtin(),
            functions: Functions::new(),
        }
    }
}

/// Builds every service from `config` with a game's own logic (its match handlers and server
/// functions), then the adapters over them: the server functions, the game's JavaScript module,
/// and the edge's shared state.
async fn build(config: Config, game: GameLogic, clock: Clock) -> anyhow::Result<AppState> {
    let GameLogic {
        handlers,
        mut functions,
    } = game;
    warn_default_secrets(&config);
    let services = Services::build(config, handlers, clock).await?;
    let config = services.config.clone();
    // The studio's game servers answer their Agones SDK at the edge.
    if let Some(fleet) = &services.rooms.fleet {
        fleet.serve_sdk_with(Arc::new(crate::net::fleet_sdk::AgonesSdk));
    }
    if let Some(world) = &services.world {
        crate::functions::world::register(&mut functions, world);
    }
    builtins::register(
        &mut functions,
        &config.runtime.builtin_functions,
        &config.runtime.player_builtin_functions,
    );
    // The game's JavaScript module, when `runtime.path` names one: its RPCs are functions and
    // its match handlers are handlers too.
    let js_host = crate::runtime::js::host::ServerHost::new(
        services.clone(),
        crate::runtime::js::HttpRules::new(&config.runtime),
    );
    let module = crate::runtime::js::Module::start(
        &config.runtime,
        services.matches.node(),
        js_host,
        crate::runtime::js::JsMetrics::new(services.metrics.registry()),
    )?;
    if let Some(module) = &module {
        module.register(&mut functions, &services.matches);
        if module.registered().matchmaker_matched {
            let hook = Arc::new(crate::runtime::js::hooks::JsMatched(module.clone()));
            services.matches.set_matched_hook(hook);
        }
        // Told of every store notification; the hooks in force at the time decide (a reload
        // may add or remove them).
        let notifications =
            crate::runtime::js::purchase_hooks::JsPurchaseNotifications(module.clone());
        if services
            .purchases
            .observe_notifications(Arc::new(notifications))
            .is_err()
        {
            tracing::warn!(
                "store notifications already have an observer: the module's hooks are not called"
            );
        }
        if crate::runtime::js::schedule::JsSchedule::registered(module) {
            let schedule = Arc::new(crate::runtime::js::schedule::JsSchedule(module.clone()));
            services.leaderboards.start_schedule(schedule);
        }
    }
    services.matches.check_match_handler()?;
    let rpc = Arc::new(Rpc::new(functions, services.clone()));
    let limits = &config.limits;
    let metrics = &services.metrics;
    Ok(AppState::new(Shared {
        console_limit: Arc::new(IpLimit::new(
            config.console.requests_per_ip_per_sec,
            config.console.request_burst,
        )),
        connections: Arc::new(ConnectionCounter::new(
            limits.max_connections_per_ip,
            limits.max_connections,
            limits.connection_headroom,
            metrics.clone(),
        )),
        // Checked by Config::validate.
        trusted_proxies: crate::base::client_ip::TrustedProxies::parse(&limits.trusted_proxies)
            .unwrap_or_default(),
        auth_limit: Arc::new(IpLimit::new(limits.auth_per_ip_per_sec, limits.auth_burst)),
        connect_limit: Arc::new(IpLimit::new(
            limits.connect_per_ip_per_sec,
            limits.connect_burst,
        )),
        links_limit: Arc::new(IpLimit::new(
            config.links.requests_per_ip_per_sec,
            config.links.request_burst,
        )),
        gateway: Arc::new(crate::net::graphql::build(
            &config.gateway,
            services.accounts.clone(),
        )?),
        gateway_limit: Arc::new(IpLimit::new(
            config.gateway.requests_per_ip_per_sec,
            config.gateway.request_burst,
        )),
        rpc,
        module,
        shutdown: services.shutdown.clone(),
        sockets: TaskTracker::new(),
        services,
    }))
}

/// Says, at start, which secret is left at a value everyone knows (or empty where that opens
/// an endpoint).
fn warn_default_secrets(config: &Config) {
    if config.server_key == Config::default().server_key {
        tracing::warn!(
            "server_key is the default: any client can create accounts; set your own before going public"
        );
    }
    if config.runtime.http_key == RuntimeConfig::default().http_key {
        tracing::warn!(
            "runtime.http_key is the default: anyone can call server functions as any user; set your own"
        );
    }
    if !config.links.listen.is_empty() && config.links.public_create {
        tracing::warn!(
            "links.public_create is on: anyone may create short links (per-IP limits apply); watch for phishing, set links.blocked_domains"
        );
    }
    if config.metrics.token.is_empty() {
        tracing::warn!(
            "metrics.token is empty: /metrics answers anyone; set it, or expose the port only to your Prometheus network"
        );
    }
}

/// Serves on `listener` until `shutdown` resolves, then shuts down gracefully.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    run_with(listener, config, GameLogic::default(), shutdown).await
}

/// [`run`] with a game's own logic: authoritative match handlers (see
/// [`crate::matches::handler`]) and server functions (see [`crate::functions`]).
pub async fn run_with(
    listener: TcpListener,
    config: Config,
    game: GameLogic,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    run_with_clock(listener, config, game, Clock::system(), shutdown).await
}

/// [`run_with`] on a given clock: tests pass a [`Clock::manual`] and move it, so that a session
/// token expires when the test says so instead of after a sleep.
pub async fn run_with_clock(
    listener: TcpListener,
    config: Config,
    game: GameLogic,
    clock: Clock,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let links = bind_setting(&config.links.listen, "links.listen").await?;
    let console = if config.console.enabled() {
        bind_setting(&config.console.listen, "console.listen").await?
    } else {
        None
    };
    let grpc = bind_setting(&config.grpc.listen, "grpc.listen").await?;
    let listeners = Listeners {
        http: listener,
        links,
        console,
        grpc,
    };
    run_on(listeners, config, game, clock, shutdown).await
}

/// The listeners a caller binds itself (tests bind port 0 and read the address): the HTTP API,
/// the links service and the console when they are on.
pub struct Listeners {
    pub http: TcpListener,
    pub links: Option<TcpListener>,
    /// Served only when `console.admin_password` is set.
    pub console: Option<TcpListener>,
    /// Nakama's API over gRPC (`grpc.listen`).
    pub grpc: Option<TcpListener>,
}

/// Binds `address` (the value of `setting`), or nothing when it is empty; a failure names the
/// setting.
async fn bind_setting(address: &str, setting: &str) -> anyhow::Result<Option<TcpListener>> {
    if address.is_empty() {
        return Ok(None);
    }
    TcpListener::bind(address)
        .await
        .map(Some)
        .map_err(|e| anyhow::anyhow!("cannot listen on {address} (setting {setting}): {e}"))
}

/// Binds the ENet transport's sockets (one per loop), or none when `enet.listen` is empty.
fn bind_enet(config: &crate::config::EnetConfig) -> anyhow::Result<Vec<UdpSocket>> {
    if config.listen.is_empty() {
        return Ok(Vec::new());
    }
    crate::net::enet::bind(config).map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {} (setting enet.listen): {e}",
            config.listen
        )
    })
}

/// [`run_with_clock`] on listeners the caller bound.
pub async fn run_on(
    listeners: Listeners,
    config: Config,
    game: GameLogic,
    clock: Clock,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let Listeners {
        http: listener,
        links: links_listener,
        console: console_listener,
        grpc: grpc_listener,
    } = listeners;
    let state = build(config, game, clock).await?;
    // Every listener is bound before any is announced: a port that is taken stops the start
    // with an error naming its setting, not after the server said it was up.
    let tcp = bind_setting(&state.services.config.rooms.tcp_listen, "rooms.tcp_listen").await?;
    let enet = bind_enet(&state.services.config.enet)?;
    state.services.matches.start();
    state.services.rooms.start();
    if let Some(bound) = enet.first().map(UdpSocket::local_addr).transpose()? {
        state
            .services
            .matches
            .set_enet_port(bound.port(), state.services.config.enet.public_port);
        tracing::info!(enet = %bound, loops = enet.len(), "ENet transport listening (UDP)");
        tokio::spawn(crate::net::enet::serve(enet, state.clone()));
    }
    let http_address = listener.local_addr()?;
    state.services.matches.set_http_port(
        http_address.port(),
        &state.services.config.cluster.advertise,
    );
    // Part of a cluster: heartbeats over NATS from now until shutdown (a node that cannot reach
    // NATS does not start).
    // Part of a cluster: revocations shared, heartbeats from now until shutdown.
    if let Some(cluster) = &state.services.cluster {
        let config = &state.services.config.cluster;
        crate::accounts::cluster::relay_revocations(
            state.services.tokens.clone(),
            cluster.bus.clone(),
        )
        .await?;
        let advertise = if config.advertise.is_empty() {
            http_address.to_string()
        } else {
            config.advertise.clone()
        };
        let mut observers: Vec<Arc<dyn crate::cluster::membership::MembershipObserver>> = vec![
            cluster.router.clone(),
            state.services.matches.clone(),
            state.services.parties.clone(),
        ];
        // A clustered world places its shards over the live nodes.
        if let Some(world) = &state.services.world {
            observers.push(world.clone());
        }
        // The console asks the other nodes for their status history, and answers theirs.
        if let Some(console) = &state.services.console {
            if let Some(console_cluster) = &console.cluster {
                observers.push(console_cluster.nodes.clone());
                console_cluster.serve(console.history.clone()).await?;
            }
        }
        crate::cluster::membership::join(
            config,
            cluster.bus.clone(),
            advertise,
            observers,
            state.services.metrics.registry(),
            state.shutdown.clone(),
        )
        .await?;
    }
    match tcp {
        Some(tcp) => {
            let bound = tcp.local_addr()?;
            state.services.matches.set_tcp_addr(bound);
            tracing::info!(http = %http_address, tcp = %bound, "muster listening (HTTP /v2, WebSocket /ws, /metrics; native TCP transport)");
            tokio::spawn(crate::net::tcp::serve(tcp, state.clone()));
        }
        None => {
            tracing::info!(http = %http_address, "muster listening (HTTP /v2, WebSocket /ws, /metrics)")
        }
    }
    let grace = state.services.config.shutdown_grace();
    let app = crate::net::http::router(state.clone());
    let cancel = state.shutdown.clone();
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections; closing sockets");
        cancel.cancel();
    });
    let housekeeping = tokio::spawn(housekeeping(state.clone()));
    if let Some(module) = state.module.clone() {
        tokio::spawn(reload_on_hangup(module));
    }
    // Stopped once no request can count a click any more, then writes the last counts.
    let stop_clicks = CancellationToken::new();
    let clicks = tokio::spawn(
        state
            .services
            .links
            .clone()
            .flush_clicks_until(stop_clicks.clone()),
    );
    let links = links_listener.map(|links_listener| {
        if let Ok(address) = links_listener.local_addr() {
            tracing::info!(links = %address, "links service listening (/, /{{code}}, /api/links)");
        }
        let router = crate::net::links::router(state.clone());
        tokio::spawn(listener::serve(
            links_listener,
            router,
            http_edge(&state),
            state.shutdown.clone(),
        ))
    });
    let console = match (console_listener, state.services.console.clone()) {
        (Some(console_listener), Some(console)) => {
            if let Ok(address) = console_listener.local_addr() {
                tracing::info!(console = %address, "console listening");
            }
            let sampler = tokio::spawn(console.history.clone().run());
            let serving = tokio::spawn(listener::serve(
                console_listener,
                crate::net::console::router(state.clone()),
                http_edge(&state),
                state.shutdown.clone(),
            ));
            Some((sampler, serving))
        }
        _ => None,
    };
    let grpc = grpc_listener.map(|grpc_listener| {
        if let Ok(address) = grpc_listener.local_addr() {
            tracing::info!(grpc = %address, "gRPC listening (nakama.api.Nakama, health, reflection)");
        }
        tokio::spawn(crate::net::grpc::serve(
            grpc_listener,
            state.clone(),
            app.clone(),
            state.shutdown.clone(),
        ))
    });
    let requests = listener::serve(listener, app, http_edge(&state), state.shutdown.clone()).await;

    // In-flight HTTP requests (API and links) and socket closes share one grace period.
    let deadline = tokio::time::Instant::now() + grace;
    let link_requests = match links {
        Some(serving) => serving.await.ok(),
        None => None,
    };
    let console_requests = match console {
        Some((sampler, serving)) => {
            sampler.abort();
            serving.await.ok()
        }
        None => None,
    };
    let all_requests = async {
        requests.wait().await;
        if let Some(link_requests) = &link_requests {
            link_requests.wait().await;
        }
        if let Some(console_requests) = &console_requests {
            console_requests.wait().await;
        }
        // The gRPC edge answers its calls in progress, then stops.
        if let Some(grpc) = grpc {
            let _ = grpc.await;
        }
    };
    if tokio::time::timeout_at(deadline, all_requests)
        .await
        .is_err()
    {
        tracing::warn!("HTTP requests still running after the grace period; dropping them");
    }
    state.sockets.close();
    if tokio::time::timeout_at(deadline, state.sockets.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = state.services.registry.sockets(),
            "sockets still open after the grace period"
        );
    }
    housekeeping.abort();
    // Every world shard writes its last checkpoint.
    if let Some(world) = state.services.world.clone() {
        let stopping = world.clone();
        if tokio::task::spawn_blocking(move || stopping.stop())
            .await
            .is_err()
        {
            tracing::error!("a world shard stopped abnormally");
        }
        // A clustered world's shards move to the other nodes at once.
        world.release().await;
    }
    // The last click counts, before the store closes.
    stop_clicks.cancel();
    if clicks.await.is_err() {
        tracing::error!("the click writer stopped abnormally");
    }
    state.services.stores.close().await;
    tracing::info!("shutdown complete");
    Ok(())
}

/// What the HTTP listeners (the API and the links service) share: the connection caps and the
/// head timeout.
fn http_edge(state: &AppState) -> HttpEdge {
    HttpEdge {
        counter: state.connections.clone(),
        header_read_timeout: Duration::from_millis(
            state.services.config.limits.header_read_timeout_ms,
        ),
        metrics: state.services.metrics.clone(),
    }
}

/// Binds `config.listen` and serves until SIGTERM or SIGINT, with no game logic of a studio's
/// own (the `muster serve` command is [`crate::cli::main_with`], which also sets up logging and
/// the runtime).
pub async fn serve(config: Config) -> anyhow::Result<()> {
    serve_with(config, GameLogic::default()).await
}

/// [`serve`] with a game's own logic (match handlers, server functions): what a game's own
/// `main` calls.
pub async fn serve_with(config: Config, game: GameLogic) -> anyhow::Result<()> {
    let listener = TcpListener::bind(&config.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {} (setting listen): {e}", config.listen))?;
    run_with(listener, config, game, termination()).await
}

/// Resolves on SIGTERM or SIGINT.
pub async fn termination() {
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

/// Reloads the JavaScript module at each SIGHUP; a bundle that does not load is logged and
/// the old one stays.
async fn reload_on_hangup(module: Arc<crate::runtime::js::Module>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            return;
        };
        while hangups.recv().await.is_some() {
            let module = module.clone();
            match tokio::task::spawn_blocking(move || module.reload()).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::error!(%error, "the JavaScript module was not reloaded; the old one stays")
                }
                Err(_) => tracing::error!("the JavaScript module's reload failed"),
            }
        }
    }
    #[cfg(not(unix))]
    let _ = module;
}

/// Periodic upkeep that keeps bounded maps bounded.
async fn housekeeping(state: AppState) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    tick.tick().await;
    loop {
        tick.tick().await;
        state.auth_limit.prune();
        state.connect_limit.prune();
        state.links_limit.prune();
        state.console_limit.prune();
        if let Some(console) = &state.services.console {
            console.prune_limits();
        }
        state.gateway_limit.prune();
        state.services.links.prune_limits();
        state.services.friends.prune_limits();
        state.services.groups.prune_limits();
        if let Some(world) = &state.services.world {
            world.prune_limits();
        }
        if let Err(error) = state.services.tokens.reload_revocations().await {
            tracing::warn!(%error, "pruning revoked tokens failed");
        }
        if let Err(error) = state.services.accounts.reload_bans().await {
            tracing::warn!(%error, "reading the banned accounts failed");
        }
    }
}

/// Logs to stderr with `filter` (overridden by RUST_LOG when set), as text or as JSON lines.
pub fn init_logging(filter: &str, format: crate::config::LogFormat) {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| filter.to_owned());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr);
    let _ = match format {
        crate::config::LogFormat::Text => builder.try_init(),
        crate::config::LogFormat::Json => builder.json().try_init(),
    };
}
