//! The production engine: PostgreSQL (and CockroachDB, which speaks its wire protocol). Reads go
//! through a `deadpool-postgres` pool (`database.pool_size`); every frequent write — account
//! creation with its starting grant, revocations, profile changes, chat messages, wallet and
//! inventory changes, link creates and visits — goes through the group-commit writers
//! (`writer.rs`, `database.writer_connections` dedicated connections), which turn many writes
//! into few transactions and answer each caller once its batch is durable.

mod accounts;
mod chat;
mod console;
mod economy;
mod friends;
mod groups;
mod leaderboards;
mod lifecycle;
mod links;
mod matchmaker;
mod notifications;
mod storage;
mod world_leases;
mod writer;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;
use uuid::Uuid;

use self::economy::{self as postgres_economy, LedgerBatch};
use self::writer::{key_of, WriterSettings, Writers};
use crate::base::config::Config;
use crate::base::metrics::Metrics;
use crate::store::migrations::{self, LEDGER_TABLE};
use crate::store::{
    EconomyStore, InventoryItem, LedgerEntry, LedgerOutcome, LedgerWrite, Store, StoreError,
};

pub struct PostgresStore {
    pool: Pool,
    writers: Writers,
    metrics: Arc<Metrics>,
}

/// Whether `error` says the connection (not the statement) failed: the server went away, is
/// shutting down or refuses connections. Nothing the statement did was committed.
pub(super) fn is_connection_error(error: &tokio_postgres::Error) -> bool {
    match error.code() {
        None => error.as_db_error().is_none(),
        Some(code) => {
            code.code().starts_with("08")
                || code == &SqlState::ADMIN_SHUTDOWN
                || code == &SqlState::CRASH_SHUTDOWN
                || code == &SqlState::CANNOT_CONNECT_NOW
        }
    }
}

/// The one mapping of PostgreSQL's errors to what domain code tells apart: a taken username, a
/// row a foreign key needed that is not there, an unreachable database, and everything else
/// (with the server's own message and code; `Display` alone says only "db error").
pub(super) fn db_error_ref(error: &tokio_postgres::Error) -> StoreError {
    match error.as_db_error() {
        _ if is_connection_error(error) => StoreError::Unavailable(format!("PostgreSQL: {error}")),
        Some(db)
            if db.code() == &SqlState::UNIQUE_VIOLATION
                && db.constraint() == Some("users_username_key") =>
        {
            StoreError::UsernameTaken
        }
        Some(db)
            if db.code() == &SqlState::UNIQUE_VIOLATION
                && matches!(
                    db.constraint(),
                    Some("users_email_key" | "users_custom_id_key" | "user_devices_pkey")
                ) =>
        {
            StoreError::CredentialTaken
        }
        Some(db)
            if db.code() == &SqlState::UNIQUE_VIOLATION
                && db.constraint() == Some("groups_name_key") =>
        {
            StoreError::Group(crate::store::groups::GroupRefusal::NameInUse)
        }
        Some(db) if db.code() == &SqlState::FOREIGN_KEY_VIOLATION => StoreError::NotFound,
        Some(db) => StoreError::Database(format!("{} ({})", db.message(), db.code().code())),
        None => StoreError::Database(error.to_string()),
    }
}

pub(super) fn db_error(error: tokio_postgres::Error) -> StoreError {
    db_error_ref(&error)
}

/// `sql` prepared once per pooled connection (the pool keeps each connection's statements), so a
/// read is parsed and planned once, not on every call.
pub(super) async fn prepared(
    client: &impl deadpool_postgres::GenericClient,
    sql: &str,
) -> Result<tokio_postgres::Statement, StoreError> {
    client.prepare_cached(sql).await.map_err(db_error)
}

fn pool_error(error: deadpool_postgres::PoolError) -> StoreError {
    match error {
        deadpool_postgres::PoolError::Closed => StoreError::Closed,
        deadpool_postgres::PoolError::Backend(e) => db_error(e),
        other => StoreError::Unavailable(format!("PostgreSQL pool: {other}")),
    }
}

fn pg_config(config: &Config) -> anyhow::Result<tokio_postgres::Config> {
    config
        .database_url
        .parse()
        .map_err(|e| anyhow::anyhow!("database_url is not a valid PostgreSQL URL: {e}"))
}

fn build_pool(config: &Config) -> anyhow::Result<Pool> {
    let pg_config = pg_config(config)?;
    let manager = Manager::from_config(
        pg_config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Ok(Pool::builder(manager)
        .max_size(config.database.pool_size)
        .build()?)
}

async fn apply_migrations(pool: &Pool, allowed: bool) -> anyhow::Result<(usize, i64)> {
    let mut client = pool.get().await?;
    client.batch_execute(LEDGER_TABLE).await?;
    // One migrator at a time across nodes starting together.
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock(7350)", &[])
        .await?;
    let applied: i64 = tx.query_one(migrations::APPLIED_VERSION, &[]).await?.get(0);
    let pending = migrations::plan(migrations::POSTGRES, applied, allowed)?;
    let mut version = applied;
    for migration in pending {
        tx.batch_execute(migration.sql).await?;
        tx.execute(
            "INSERT INTO muster_migrations (version, name, applied_at_ms) VALUES ($1, $2, $3)",
            &[
                &migration.version,
                &migration.name,
                &crate::base::clock::now_ms(),
            ],
        )
        .await?;
        migrations::applied(migration);
        version = migration.version;
    }
    tx.commit().await?;
    Ok((pending.len(), version))
}

/// Applies pending migrations (the `muster migrate` command).
pub async fn migrate(config: &Config) -> anyhow::Result<(usize, i64)> {
    let pool = build_pool(config)?;
    let result = apply_migrations(&pool, true).await;
    pool.close();
    result
}

impl PostgresStore {
    pub async fn open(config: &Config, metrics: Arc<Metrics>) -> anyhow::Result<PostgresStore> {
        let pool = build_pool(config)?;
        apply_migrations(&pool, config.database.migrate_on_start)
            .await
            .map_err(|e| anyhow::anyhow!("PostgreSQL at database_url: {e:#}"))?;
        let settings = WriterSettings {
            connections: config.database.writer_connections,
            max_batch: config.database.max_batch,
            queue: config.database.write_queue_size,
        };
        let writers = Writers::start(pg_config(config)?, settings, metrics.clone())
            .await
            .map_err(|e| anyhow::anyhow!("PostgreSQL writer connections: {e:#}"))?;
        tracing::info!(
            pool = config.database.pool_size,
            writers = config.database.writer_connections,
            "PostgreSQL store open"
        );
        Ok(PostgresStore {
            pool,
            writers,
            metrics,
        })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }
}

#[async_trait]
impl EconomyStore for PostgresStore {
    async fn apply_ledger(&self, write: LedgerWrite) -> Result<LedgerOutcome, StoreError> {
        // One account's writes take one writer, so they apply in the order they came.
        let started = Instant::now();
        let key = key_of(write.user_id);
        let (job, answered) = LedgerBatch::single(write);
        self.writers.submit(key, job).await?;
        let result = answered.await.map_err(|_| StoreError::Closed)?;
        self.metrics.observe_db("apply_ledger", started.elapsed());
        result
    }

    async fn wallet(&self, user_id: Uuid) -> Result<Vec<(String, i64)>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let result = postgres_economy::wallet(&client, user_id).await;
        self.metrics.observe_db("wallet", started.elapsed());
        result
    }

    async fn inventory(
        &self,
        user_id: Uuid,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<InventoryItem>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let result = postgres_economy::inventory(&client, user_id, after.as_deref(), limit).await;
        self.metrics.observe_db("inventory", started.elapsed());
        result
    }

    async fn ledger(
        &self,
        user_id: Uuid,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let result = postgres_economy::ledger(&client, user_id, before, limit).await;
        self.metrics.observe_db("ledger", started.elapsed());
        result
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn close(&self) {
        self.writers.close().await;
        self.pool.close();
    }

    fn shared_matchmaker(&self) -> Option<Arc<dyn crate::store::MatchmakerStore>> {
        Some(Arc::new(matchmaker::PgMatchmaker {
            pool: self.pool.clone(),
        }))
    }

    fn world_leases(&self) -> Option<Arc<dyn crate::store::WorldLeaseStore>> {
        Some(Arc::new(world_leases::PgWorldLeases {
            pool: self.pool.clone(),
        }))
    }
}
