//! The production engine: PostgreSQL (and CockroachDB, which speaks its wire protocol). Reads go
//! through a `deadpool-postgres` pool (`database.pool_size`); every frequent write — account
//! creation with its starting grant, revocations, profile changes, chat messages, wallet and
//! inventory changes, link creates and visits — goes through the group-commit writers
//! (`writer.rs`, `database.writer_connections` dedicated connections), which turn many writes
//! into few transactions and answer each caller once its batch is durable.

pub(crate) mod writer;

use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

use self::writer::{WriterSettings, Writers};
use crate::base::metrics::Metrics;
use crate::store::config::StoreConfig;
use crate::store::migrations::{self, Schema, LEDGER_TABLE};
use crate::store::{SecretStore, StoreError};

pub struct PostgresStore {
    pub(crate) pool: Pool,
    pub(crate) writers: Writers,
    pub(crate) metrics: Arc<Metrics>,
}

/// Whether `error` says the connection (not the statement) failed: the server went away, is
/// shutting down or refuses connections. Nothing the statement did was committed.
pub(crate) fn is_connection_error(error: &tokio_postgres::Error) -> bool {
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

/// The one mapping of PostgreSQL's errors to what callers tell apart: a row a foreign key
/// needed that is not there, an unreachable database, and everything else (with the server's
/// own message and code; `Display` alone says only "db error"). A slice that gives a unique key a
/// meaning of its own maps [`unique_violation`] first.
pub(crate) fn db_error_ref(error: &tokio_postgres::Error) -> StoreError {
    match error.as_db_error() {
        _ if is_connection_error(error) => StoreError::Unavailable(format!("PostgreSQL: {error}")),
        Some(db) if db.code() == &SqlState::FOREIGN_KEY_VIOLATION => StoreError::NotFound,
        Some(db) => StoreError::Database(format!("{} ({})", db.message(), db.code().code())),
        None => StoreError::Database(error.to_string()),
    }
}

/// The constraint `error` violates, by name (`users_username_key`), when it is a unique or
/// primary key violation.
pub(crate) fn unique_violation(error: &tokio_postgres::Error) -> Option<&str> {
    let db = error.as_db_error()?;
    (db.code() == &SqlState::UNIQUE_VIOLATION)
        .then(|| db.constraint())
        .flatten()
}

pub(crate) fn db_error(error: tokio_postgres::Error) -> StoreError {
    db_error_ref(&error)
}

/// `sql` prepared once per pooled connection (the pool keeps each connection's statements), so a
/// read is parsed and planned once, not on every call.
pub(crate) async fn prepared(
    client: &impl deadpool_postgres::GenericClient,
    sql: &str,
) -> Result<tokio_postgres::Statement, StoreError> {
    client.prepare_cached(sql).await.map_err(db_error)
}

pub(crate) fn pool_error(error: deadpool_postgres::PoolError) -> StoreError {
    match error {
        deadpool_postgres::PoolError::Closed => StoreError::Closed,
        deadpool_postgres::PoolError::Backend(e) => db_error(e),
        other => StoreError::Unavailable(format!("PostgreSQL pool: {other}")),
    }
}

fn pg_config(config: &StoreConfig) -> anyhow::Result<tokio_postgres::Config> {
    config
        .url
        .parse()
        .map_err(|e| anyhow::anyhow!("database_url is not a valid PostgreSQL URL: {e}"))
}

fn build_pool(config: &StoreConfig) -> anyhow::Result<Pool> {
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

async fn apply_migrations(
    pool: &Pool,
    schema: &Schema,
    allowed: bool,
) -> anyhow::Result<(usize, i64)> {
    let mut client = pool.get().await?;
    client.batch_execute(LEDGER_TABLE).await?;
    // One migrator at a time across nodes starting together.
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock(7350)", &[])
        .await?;
    let applied: i64 = tx.query_one(migrations::APPLIED_VERSION, &[]).await?.get(0);
    let pending = migrations::plan(schema, applied, allowed)?;
    let mut version = applied;
    for migration in pending {
        tx.batch_execute(migration.postgres).await?;
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
pub async fn migrate(config: &StoreConfig, schema: &Schema) -> anyhow::Result<(usize, i64)> {
    let pool = build_pool(config)?;
    let result = apply_migrations(&pool, schema, true).await;
    pool.close();
    result
}

impl PostgresStore {
    pub async fn open(
        config: &StoreConfig,
        schema: &Schema,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<PostgresStore> {
        let pool = build_pool(config)?;
        apply_migrations(&pool, schema, config.database.migrate_on_start)
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

    /// A pooled connection for a read or a transaction of its own.
    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }
}

impl PostgresStore {
    /// Finishes pending writes and closes every connection.
    pub async fn close(&self) {
        self.writers.close().await;
        self.pool.close();
    }
}

#[async_trait]
impl SecretStore for PostgresStore {
    async fn secret(&self, name: &str, candidate: String) -> Result<String, StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
                &[&name, &candidate],
            )
            .await
            .map_err(db_error)?;
        let row = client
            .query_one("SELECT value FROM secrets WHERE name = $1", &[&name])
            .await
            .map_err(db_error)?;
        Ok(row.get(0))
    }
}
