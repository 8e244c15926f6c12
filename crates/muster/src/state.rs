//! The shared state every transport's handlers receive, and how it is built from configuration.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::accounts::password::Hasher;
use crate::accounts::tokens::TokenService;
use crate::accounts::Accounts;
use crate::base::config::Config;
use crate::base::metrics::Metrics;
use crate::base::ratelimit::IpLimit;
use crate::chat::Chat;
use crate::economy::Economy;
use crate::functions::{builtins, Functions, Rpc};
use crate::matches::handler::Handlers;
use crate::matches::Matches;
use crate::session::SessionRegistry;
use crate::store::{self, StartingGrant, Store};

/// Everything handlers share; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    pub tokens: Arc<TokenService>,
    pub accounts: Arc<Accounts>,
    pub metrics: Arc<Metrics>,
    pub registry: Arc<SessionRegistry>,
    /// Matches, the matchmaker and rooms.
    pub matches: Arc<Matches>,
    /// Chat channels: membership, message ids, limits.
    pub chat: Arc<Chat>,
    /// Server functions (and, through them, wallets and inventories).
    pub rpc: Arc<Rpc>,
    pub auth_limit: Arc<IpLimit>,
    pub connect_limit: Arc<IpLimit>,
    /// Cancelled when the server begins shutting down; every socket task watches it.
    pub shutdown: CancellationToken,
    /// Tracks socket tasks, so shutdown knows when every socket has closed.
    pub sockets: TaskTracker,
}

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

impl AppState {
    pub async fn build(config: Config) -> anyhow::Result<AppState> {
        AppState::build_with(config, GameLogic::default()).await
    }

    /// Builds the state with a game's own logic: its match handlers and server functions.
    pub async fn build_with(config: Config, game: GameLogic) -> anyhow::Result<AppState> {
        let GameLogic {
            handlers,
            mut functions,
        } = game;
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
        let chat = Arc::new(Chat::new(&config.chat, &store, metrics.clone()).await?);
        builtins::register(&mut functions, &config.runtime.builtin_functions);
        let economy = Arc::new(Economy::new(store.clone(), metrics.clone()));
        let rpc = Arc::new(Rpc::new(functions, economy, metrics.clone()));
        if config.runtime.http_key == crate::base::config::RuntimeConfig::default().http_key {
            tracing::warn!(
                "runtime.http_key is the default: anyone can call server functions as any user; set your own"
            );
        }
        let limits = &config.limits;
        let shutdown = CancellationToken::new();
        let matches =
            Matches::build(&config, &store, &metrics, handlers, shutdown.child_token()).await?;
        // One cleanup path for every transport: a session that ends leaves its chat channels
        // first (telling their other members), then its matches and matchmaker tickets.
        let registry = Arc::new(SessionRegistry::new(metrics.clone()));
        registry.on_session_closed(chat.clone());
        registry.on_session_closed(matches.clone());
        Ok(AppState {
            matches,
            chat,
            auth_limit: Arc::new(IpLimit::new(limits.auth_per_ip_per_sec, limits.auth_burst)),
            connect_limit: Arc::new(IpLimit::new(
                limits.connect_per_ip_per_sec,
                limits.connect_burst,
            )),
            registry,
            rpc,
            config: Arc::new(config),
            store,
            tokens,
            accounts,
            metrics,
            shutdown,
            sockets: TaskTracker::new(),
        })
    }
}
