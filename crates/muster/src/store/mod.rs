//! The engines' plumbing, which every slice's persistence stands on: `sqlite` (embedded, the
//! default) and `postgres` (production; also CockroachDB) — their connections, their
//! group-commit writers, the [`migrations`] runner — the one error type, and the server's
//! secrets.
//!
//! No domain rule lives here. Each slice owns its store trait and both engines' statements
//! (`<slice>/store.rs`, `<slice>/sqlite.rs`, `<slice>/postgres.rs`) and its migrations
//! (`<slice>/migrations/`); [`Engine`] is an open database, on which the slices' traits are
//! implemented.

pub mod config;
pub mod migrations;
pub(crate) mod postgres;
pub mod sql;
pub(crate) mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;

use self::migrations::Schema;
use crate::base::metrics::Metrics;
use crate::store::config::StoreConfig;

/// A failed storage operation, as domain code needs to tell them apart.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("username is already in use")]
    UsernameTaken,
    /// A device id, custom id or email that another account has.
    #[error("credential is linked to another account")]
    CredentialTaken,
    /// A link code (or custom slug) that another link has.
    #[error("code is already in use")]
    CodeTaken,
    #[error("not found")]
    NotFound,
    /// A per-user bound would be passed.
    #[error("limit reached")]
    LimitReached,
    #[error("store is closed")]
    Closed,
    /// The database cannot be reached (down, restarting, refusing connections); nothing of the
    /// write was committed. Retrying later may succeed.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Database(String),
    /// A change a slice's rules refused inside the engine's transaction (nothing changed); the
    /// slice reads its own refusal back with [`StoreError::refusal`].
    #[error(transparent)]
    Refused(Arc<dyn std::error::Error + Send + Sync>),
}

impl StoreError {
    /// A refusal of a slice's rules, carried through the engine to the slice.
    pub fn refused(refusal: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::Refused(Arc::new(refusal))
    }

    /// The slice's refusal of type `T`, when this is one.
    pub fn refusal<T: std::error::Error + 'static>(&self) -> Option<&T> {
        match self {
            StoreError::Refused(refusal) => refusal.downcast_ref(),
            _ => None,
        }
    }
}

/// Server secrets generated once and shared by every node on the database.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait SecretStore: Send + Sync {
    /// The secret named `name`, set to `candidate` if it did not exist yet. Every node sharing
    /// the database reads the same value.
    async fn secret(&self, name: &str, candidate: String) -> Result<String, StoreError>;
}

/// An open database: one of the two engines, with its schema checked (and, if allowed,
/// migrated) to the slices' migrations.
#[derive(Clone)]
pub enum Engine {
    Sqlite(Arc<sqlite::SqliteStore>),
    Postgres(Arc<postgres::PostgresStore>),
}

impl Engine {
    /// Opens the engine `config` names, checking (and, if allowed, migrating) `schema`.
    pub async fn open(
        config: &StoreConfig,
        schema: &Schema,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Engine> {
        Ok(if config.url.is_empty() {
            Engine::Sqlite(Arc::new(
                sqlite::SqliteStore::open(config, schema, metrics).await?,
            ))
        } else {
            Engine::Postgres(Arc::new(
                postgres::PostgresStore::open(config, schema, metrics).await?,
            ))
        })
    }

    /// Finishes pending writes and releases the database.
    pub async fn close(&self) {
        match self {
            Engine::Sqlite(engine) => engine.close().await,
            Engine::Postgres(engine) => engine.close().await,
        }
    }

    /// The server's secrets, shared by every node on the database.
    pub fn secrets(&self) -> Arc<dyn SecretStore> {
        match self {
            Engine::Sqlite(engine) => engine.clone(),
            Engine::Postgres(engine) => engine.clone(),
        }
    }
}

/// A consistent copy of the SQLite database at `to`, taken while the server runs (the `muster
/// backup` command); on PostgreSQL, `pg_dump` or the database's own backups do this.
pub async fn backup(config: &StoreConfig, to: &std::path::Path) -> anyhow::Result<u64> {
    if !config.url.is_empty() {
        anyhow::bail!(
            "muster backup copies the embedded SQLite database; on PostgreSQL use pg_dump or its \
             continuous archiving (docs/deploy.md)"
        );
    }
    sqlite::backup(config, to).await
}

/// Applies `schema`'s pending migrations and returns (applied now, schema version).
pub async fn migrate(config: &StoreConfig, schema: &Schema) -> anyhow::Result<(usize, i64)> {
    if config.url.is_empty() {
        sqlite::migrate(config, schema).await
    } else {
        postgres::migrate(config, schema).await
    }
}
