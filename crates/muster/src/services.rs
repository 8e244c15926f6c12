//! The services layer: what every adapter (HTTP, the realtime socket, server functions, the
//! runtimes, the console) calls, built once by [`crate::app`].
//!
//! [`Stores`] is the persistence each slice's service stands on: one open database ([`Engine`])
//! seen through each slice's own store trait, so a service holds only the part it uses.

use std::sync::Arc;

use crate::accounts::store::{AccountStore, TokenStore};
use crate::base::metrics::Metrics;
use crate::chat::store::ChatStore;
use crate::config::Config;
use crate::console::store::ConsoleStore;
use crate::economy::store::EconomyStore;
use crate::friends::store::FriendStore;
use crate::groups::store::GroupStore;
use crate::leaderboards::store::LeaderboardStore;
use crate::links::store::LinkStore;
use crate::matches::store::MatchmakerStore;
use crate::notifications::store::NotificationStore;
use crate::storage::store::StorageStore;
use crate::store::migrations::Schema;
use crate::store::{Engine, SecretStore};
use crate::world::store::WorldLeaseStore;

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
