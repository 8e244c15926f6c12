//! The services layer: [`Services`], every domain's service built once, which every adapter
//! (HTTP, the realtime socket, server functions, the runtimes, the console) calls; no adapter
//! reaches a domain through another adapter.
//!
//! [`Stores`] is the persistence each slice's service stands on: one open database ([`Engine`])
//! seen through each slice's own store trait, so a service holds only the part it uses.

use std::sync::Arc;

use crate::accounts::password::Hasher;
use crate::accounts::store::{AccountStore, TokenStore};
use crate::accounts::tokens::TokenService;
use crate::accounts::Accounts;
use crate::base::clock::Clock;
use crate::base::metrics::Metrics;
use crate::chat::presence::ChatPresence;
use crate::chat::store::ChatStore;
use crate::chat::Chat;
use crate::cluster::bus::Bus;
use crate::cluster::shared::ClusterRouter;
use crate::cluster::{Cluster, LocalRouter, Router};
use crate::config::Config;
use crate::console::store::ConsoleStore;
use crate::console::Console;
use crate::economy::store::EconomyStore;
use crate::economy::store::StartingGrant;
use crate::economy::Economy;
use crate::friends::store::FriendStore;
use crate::friends::Friends;
use crate::groups::store::GroupStore;
use crate::groups::Groups;
use crate::leaderboards::store::LeaderboardStore;
use crate::leaderboards::Leaderboards;
use crate::links::store::LinkStore;
use crate::links::Links;
use crate::matches::handler::Handlers;
use crate::matches::store::MatchmakerStore;
use crate::matches::Matches;
use crate::notifications::store::NotificationStore;
use crate::notifications::Notifications;
use crate::parties::Parties;
use crate::rooms::Rooms;
use crate::session::channels::ChannelRegistry;
use crate::session::registry::SessionObserver;
use crate::session::SessionRegistry;
use crate::status::StatusService;
use crate::storage::store::StorageStore;
use crate::storage::Storage;
use crate::store::migrations::Schema;
use crate::store::{Engine, SecretStore};
use crate::world::store::WorldLeaseStore;
use crate::world::World;
use tokio_util::sync::CancellationToken;

/// The whole schema: every slice's migrations.
pub fn schema() -> Schema {
    Schema::new(&[
        crate::accounts::store::MIGRATIONS,
        crate::chat::store::MIGRATIONS,
        crate::economy::store::MIGRATIONS,
        crate::links::store::MIGRATIONS,
        crate::matches::store::MIGRATIONS,
        crate::storage::store::MIGRATIONS,
        crate::leaderboards::store::MIGRATIONS,
        crate::notifications::store::MIGRATIONS,
        crate::friends::store::MIGRATIONS,
        crate::groups::store::MIGRATIONS,
        crate::console::store::MIGRATIONS,
        crate::world::store::MIGRATIONS,
        crate::purchases::store::MIGRATIONS,
    ])
}

/// One open database, as each slice sees it.
#[derive(Clone)]
pub struct Stores {
    pub accounts: Arc<dyn AccountStore>,
    pub tokens: Arc<dyn TokenStore>,
    pub secrets: Arc<dyn SecretStore>,
    pub chat: Arc<dyn ChatStore>,
    pub economy: Arc<dyn EconomyStore>,
    pub links: Arc<dyn LinkStore>,
    pub storage: Arc<dyn StorageStore>,
    pub leaderboards: Arc<dyn LeaderboardStore>,
    pub notifications: Arc<dyn NotificationStore>,
    /// Validated purchases and subscriptions.
    pub purchases: Arc<dyn crate::purchases::store::PurchaseStore>,
    pub friends: Arc<dyn FriendStore>,
    pub groups: Arc<dyn GroupStore>,
    pub console: Arc<dyn ConsoleStore>,
    /// The tickets and lease of a cluster's matchmaker, when the engine can be shared by several
    /// nodes (PostgreSQL; not SQLite, one node's file).
    pub matchmaker: Option<Arc<dyn MatchmakerStore>>,
    /// The shard leases of a clustered world, on an engine shared by several nodes.
    pub world_leases: Option<Arc<dyn WorldLeaseStore>>,
    /// The database itself, to close.
    pub engine: Engine,
}

impl Stores {
    /// Opens the database `config` names, checking (and, if allowed, migrating) the schema.
    pub async fn open(config: &Config, metrics: Arc<Metrics>) -> anyhow::Result<Stores> {
        let engine = Engine::open(&config.store(), &schema(), metrics).await?;
        Ok(match &engine {
            Engine::Sqlite(sqlite) => Stores {
                accounts: sqlite.clone(),
                tokens: sqlite.clone(),
                secrets: sqlite.clone(),
                chat: sqlite.clone(),
                economy: sqlite.clone(),
                links: sqlite.clone(),
                storage: sqlite.clone(),
                leaderboards: sqlite.clone(),
                notifications: sqlite.clone(),
                purchases: sqlite.clone(),
                friends: sqlite.clone(),
                groups: sqlite.clone(),
                console: sqlite.clone(),
                matchmaker: None,
                world_leases: None,
                engine: engine.clone(),
            },
            Engine::Postgres(postgres) => Stores {
                accounts: postgres.clone(),
                tokens: postgres.clone(),
                secrets: postgres.clone(),
                chat: postgres.clone(),
                economy: postgres.clone(),
                links: postgres.clone(),
                storage: postgres.clone(),
                leaderboards: postgres.clone(),
                notifications: postgres.clone(),
                purchases: postgres.clone(),
                friends: postgres.clone(),
                groups: postgres.clone(),
                console: postgres.clone(),
                matchmaker: Some(crate::matches::postgres::matchmaker(postgres)),
                world_leases: Some(crate::world::postgres::leases(postgres)),
                engine: engine.clone(),
            },
        })
    }

    /// Finishes pending writes and releases the database.
    pub async fn close(&self) {
        self.engine.close().await;
    }
}

/// Applies the schema's pending migrations (the `muster migrate` command): (applied now,
/// schema version).
pub async fn migrate(config: &Config) -> anyhow::Result<(usize, i64)> {
    crate::store::migrate(&config.store(), &schema()).await
}

/// Every domain's service, built once from the configuration; what the adapters call (the HTTP
/// API, the realtime socket, server functions, the runtimes, the console).
pub struct Services {
    pub config: Arc<Config>,
    pub metrics: Arc<Metrics>,
    pub clock: Clock,
    pub stores: Stores,
    /// Session and refresh tokens, their revocations.
    pub tokens: Arc<TokenService>,
    pub accounts: Arc<Accounts>,
    pub economy: Arc<Economy>,
    pub storage: Arc<Storage>,
    pub leaderboards: Arc<Leaderboards>,
    pub notifications: Arc<Notifications>,
    /// In-app purchases and subscriptions, validated with their stores.
    pub purchases: Arc<crate::purchases::Purchases>,
    /// Friends, invites and blocks.
    pub friends: Arc<Friends>,
    pub groups: Arc<Groups>,
    pub status: Arc<StatusService>,
    pub parties: Arc<Parties>,
    /// Chat channels: membership, message ids, limits.
    pub chat: Arc<Chat>,
    /// Matches and the matchmaker.
    pub matches: Arc<Matches>,
    /// A module's own streams (`nk.stream*`), this node's.
    pub streams: Arc<crate::streams::Streams>,
    /// Rooms, and the studio's game servers run as rooms.
    pub rooms: Arc<Rooms>,
    /// Invite links (served on their own listener).
    pub links: Arc<Links>,
    /// The persistent world, when `world.map` is set.
    pub world: Option<Arc<World>>,
    /// The operator's console, when it is on.
    pub console: Option<Arc<Console>>,
    /// Every session on this node: transports register theirs here.
    pub registry: Arc<SessionRegistry>,
    /// Delivery and presence wherever sessions are.
    pub router: Arc<dyn Router>,
    /// This node's bus and router when it is part of a cluster (`cluster.nats_url`).
    pub cluster: Option<Cluster>,
    /// Cancelled when the server begins shutting down.
    pub shutdown: CancellationToken,
}

impl Services {
    /// Builds every service from `config`, with the game's own Rust match `handlers`, on
    /// `clock` (tests move a manual one). The world's shards, the matchmaker and the fleet are
    /// built but not started; the app starts them once its listeners are bound.
    pub async fn build(
        config: Config,
        handlers: Handlers,
        clock: Clock,
    ) -> anyhow::Result<Arc<Services>> {
        let grant = StartingGrant::from_config(&config.economy)
            .map_err(|e| anyhow::anyhow!("configuration error: economy: {e}"))?;
        let metrics = Arc::new(Metrics::new());
        let stores = Stores::open(&config, metrics.clone()).await?;
        let tokens = TokenService::new(
            &config.session,
            stores.secrets.as_ref(),
            stores.tokens.clone(),
            clock.clone(),
        );
        let tokens = Arc::new(tokens.await?);
        let accounts = Accounts::new(
            stores.accounts.clone(),
            tokens.clone(),
            Hasher::new()?,
            metrics.clone(),
        );
        let providers = crate::accounts::providers::Providers::new(config.social.clone());
        let accounts = Arc::new(
            accounts
                .with_starting_grant(grant)
                .with_providers(providers),
        );
        // Sessions, and the router that reaches them wherever they are.
        let registry = Arc::new(SessionRegistry::new(metrics.clone()));
        let statuses = Arc::new(crate::status::presence::Statuses::new());
        let channels = ChannelRegistry::new(
            Arc::new(crate::status::presence::StatusPresence::over(
                Arc::new(ChatPresence),
                statuses.clone(),
            )),
            metrics.clone(),
        );
        let local = Arc::new(LocalRouter::new(registry.clone(), channels));
        // Part of a cluster: channels are shared with the other nodes over NATS (a node that
        // cannot reach NATS does not start).
        let cluster = if config.cluster.enabled() {
            let bus = Bus::connect(&config.cluster).await?;
            let router = ClusterRouter::start(local.clone(), bus.clone()).await?;
            Some(Cluster { bus, router })
        } else {
            None
        };
        let bus = cluster.as_ref().map(|c| c.bus.clone());
        // Bans: the banned accounts' tokens refused from the start, their sockets ended at once
        // on every node when a ban is made.
        let bans =
            crate::accounts::bans::Enforcer::start(registry.clone(), tokens.clone(), bus.clone());
        accounts.observe_bans(bans.clone());
        accounts
            .reload_bans()
            .await
            .map_err(|e| anyhow::anyhow!("reading the banned accounts: {e}"))?;
        bans.follow().await?;
        let (router, sessions_end): (Arc<dyn Router>, Arc<dyn SessionObserver>) = match &cluster {
            Some(cluster) => (cluster.router.clone(), cluster.router.clone()),
            None => (local.clone(), local),
        };
        let shutdown = CancellationToken::new();
        let economy = Arc::new(Economy::new(stores.economy.clone(), metrics.clone()));
        // A clustered world's shards move between nodes under leases in the shared database.
        let seat = match (&cluster, stores.world_leases.clone()) {
            (Some(cluster), Some(leases)) => Some(crate::world::ClusterSeat {
                bus: cluster.bus.clone(),
                leases,
                settle: std::time::Duration::from_millis(
                    config.cluster.failure_timeout_ms + config.cluster.heartbeat_ms,
                ),
            }),
            _ => None,
        };
        let world = World::start(
            &config.world,
            &config.data_dir,
            metrics.registry(),
            economy.clone(),
            shutdown.child_token(),
            seat,
        )
        .await?;
        let storage = Arc::new(Storage::new(stores.storage.clone(), config.storage.clone()));
        let leaderboards = Leaderboards::start(
            stores.leaderboards.clone(),
            &config.leaderboards,
            clock.clone(),
            bus.clone(),
        )
        .await
        .map_err(|e| anyhow::anyhow!("leaderboards: {e}"))?;
        let notifications = Arc::new(Notifications::new(
            stores.notifications.clone(),
            router.clone(),
            config.notifications.max_per_user,
        ));
        let purchases = crate::purchases::Purchases::new(
            &config.iap,
            stores.purchases.clone(),
            clock.clone(),
            metrics.registry(),
        )
        .map_err(|e| anyhow::anyhow!("configuration error: {e}"))?;
        let purchases = Arc::new(purchases);
        let friends = Arc::new(Friends::new(
            stores.friends.clone(),
            accounts.clone(),
            notifications.clone(),
            router.clone(),
            &config.friends,
        ));
        let group_evictions =
            crate::groups::evictions::Evictions::new(registry.clone(), router.clone(), bus.clone());
        group_evictions.follow().await?;
        let groups = Arc::new(Groups::new(
            stores.groups.clone(),
            notifications.clone(),
            router.clone(),
            group_evictions,
            &config.groups,
        ));
        let peers = crate::chat::ChatPeers {
            accounts: accounts.clone(),
            friends: friends.clone(),
            groups: groups.clone(),
        };
        let chat = Chat::new(
            &config.chat,
            stores.secrets.as_ref(),
            stores.chat.clone(),
            peers,
            metrics.clone(),
            router.clone(),
        );
        let chat = Arc::new(chat.await?);
        let status = Arc::new(StatusService::new(
            router.clone(),
            accounts.clone(),
            statuses,
            &config.status,
        ));
        let links = Arc::new(Links::new(
            &config.links,
            stores.links.clone(),
            &metrics,
            clock.clone(),
        ));
        let setup = crate::matches::MatchesSetup {
            matches: &config.matches,
            matchmaker: &config.matchmaker,
            rooms_per_user: config.rooms.max_rooms_per_user,
            room_creates_per_user_per_minute: config.rooms.creates_per_user_per_minute,
            failure_timeout_ms: config.cluster.failure_timeout_ms,
        };
        let matches = Matches::build(
            setup,
            stores.secrets.as_ref(),
            &metrics,
            handlers,
            cluster.as_ref().map(|c| &c.bus),
            stores.matchmaker.clone(),
            shutdown.child_token(),
        )
        .await?;
        // Rooms: the built-in handlers' (matches of this node) and the studio's game servers'.
        let fleet = crate::rooms::fleet::Fleet::new(
            &config.fleet,
            matches.node(),
            &config.data_dir,
            matches.tokens.clone(),
            metrics.registry(),
            shutdown.child_token(),
        )?;
        let rooms = Rooms::new(
            matches.clone(),
            fleet,
            config.rooms.clone(),
            config.cluster.advertised_host(),
        );
        // One cleanup path for every transport: a session that ends leaves its chat channels
        // first (telling their other members), then its matches and matchmaker tickets.
        registry.on_session_closed(sessions_end);
        // After the channels are left: a departing session's leave still shows its status.
        registry.on_session_closed(status.clone());
        let parties = Parties::new(
            router.clone(),
            registry.clone(),
            matches.clone(),
            bus.clone(),
            &config.parties,
        );
        parties.follow().await?;
        registry.on_session_closed(parties.clone());
        registry.on_session_closed(matches.clone());
        let streams = crate::streams::Streams::new(registry.clone());
        if let Some(world) = &world {
            registry.on_session_closed(world.clone());
        }
        let console = if config.console.enabled() {
            let history = Arc::new(crate::console::history::History::new(
                metrics.registry().clone(),
                config.console.history_max_series,
            ));
            let mut console = Console::new(
                &config.console,
                stores.console.clone(),
                Hasher::new()?,
                clock.clone(),
                history,
            );
            if let Some(bus) = &bus {
                console = console.in_cluster(bus.clone(), Arc::default());
            }
            let console = Arc::new(console);
            console
                .ensure_admin(&config.console)
                .await
                .map_err(|e| anyhow::anyhow!("making the console's admin: {e}"))?;
            Some(console)
        } else {
            None
        };
        Ok(Arc::new(Services {
            config: Arc::new(config),
            metrics,
            clock,
            stores,
            tokens,
            accounts,
            economy,
            storage,
            leaderboards,
            notifications,
            purchases,
            friends,
            groups,
            status,
            parties,
            chat,
            matches,
            streams,
            rooms,
            links,
            world,
            console,
            registry,
            router,
            cluster,
            shutdown,
        }))
    }
}
