//! The production engine: PostgreSQL (and CockroachDB, which speaks its wire protocol) through a
//! `deadpool-postgres` pool. Each account operation is one short transaction; PostgreSQL's own
//! group commit batches the fsyncs of concurrent commits.
//!
//! The two writes that come at thousands per second are batched here as well:
//! - chat messages: one task takes every message waiting (up to `database.max_batch`) and writes
//!   them with a single multi-row `INSERT … SELECT FROM UNNEST(…)`, one transaction, then answers
//!   each sender once that commit is durable. Batches are written one after another, so history
//!   order (`seq`) is commit order on this node;
//! - wallet and inventory writes go through a writer connection of their own that commits them
//!   in batches (`economy.rs`).

mod economy;
mod links;

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;
use tokio_postgres::{NoTls, Row};
use uuid::Uuid;

use self::economy::{self as postgres_economy, Writer};
use crate::base::config::Config;
use crate::base::metrics::Metrics;
use crate::store::migrations::{self, LEDGER_TABLE};
use crate::store::{
    AccountRecord, AccountStore, AccountUpdate, ChannelMessageRecord, ChatStore, Credential,
    EconomyStore, HistoryQuery, HistoryRow, Identity, InventoryItem, LedgerEntry, LedgerOutcome,
    LedgerWrite, NewUser, Revocation, SecretStore, Store, StoreError, TokenStore,
};

pub struct PostgresStore {
    pool: Pool,
    writer: Writer,
    metrics: Arc<Metrics>,
    messages: mpsc::Sender<PendingMessage>,
}

/// A chat message waiting for the batch writer, and who to tell when it is durable.
struct PendingMessage {
    message: ChannelMessageRecord,
    done: oneshot::Sender<Result<(), StoreError>>,
}

/// Messages queued beyond this make senders wait (backpressure) instead of growing memory.
const MESSAGE_QUEUE: usize = 16 * 1024;

/// The one mapping of PostgreSQL's errors to what domain code tells apart: a taken username, a
/// row a foreign key needed that is not there, and everything else (with the server's own
/// message and code; `Display` alone says only "db error").
pub(super) fn db_error_ref(error: &tokio_postgres::Error) -> StoreError {
    match error.as_db_error() {
        Some(db)
            if db.code() == &SqlState::UNIQUE_VIOLATION
                && db.constraint() == Some("users_username_key") =>
        {
            StoreError::UsernameTaken
        }
        Some(db) if db.code() == &SqlState::FOREIGN_KEY_VIOLATION => StoreError::NotFound,
        Some(db) => StoreError::Database(format!("{} ({})", db.message(), db.code().code())),
        None => StoreError::Database(error.to_string()),
    }
}

pub(super) fn db_error(error: tokio_postgres::Error) -> StoreError {
    db_error_ref(&error)
}

fn pool_error(error: deadpool_postgres::PoolError) -> StoreError {
    match error {
        deadpool_postgres::PoolError::Closed => StoreError::Closed,
        deadpool_postgres::PoolError::Backend(e) => db_error(e),
        other => StoreError::Database(other.to_string()),
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
        let writer = Writer::start(
            pg_config(config)?,
            config.database.max_batch,
            config.database.write_queue_size,
            metrics.clone(),
        )
        .await
        .map_err(|e| anyhow::anyhow!("PostgreSQL writer connection: {e:#}"))?;
        tracing::info!("PostgreSQL store open");
        let (messages, queue) = mpsc::channel(MESSAGE_QUEUE);
        tokio::spawn(write_message_batches(
            pool.clone(),
            queue,
            config.database.max_batch,
            metrics.clone(),
        ));
        Ok(PostgresStore {
            pool,
            writer,
            metrics,
            messages,
        })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }
}

/// The chat message batch writer: runs until the store is dropped.
async fn write_message_batches(
    pool: Pool,
    mut queue: mpsc::Receiver<PendingMessage>,
    max_batch: usize,
    metrics: Arc<Metrics>,
) {
    let mut batch = Vec::with_capacity(max_batch);
    while queue.recv_many(&mut batch, max_batch).await > 0 {
        let started = Instant::now();
        let result = insert_messages(&pool, &batch).await;
        if let Err(error) = &result {
            tracing::error!(%error, messages = batch.len(), "writing chat messages failed");
        }
        metrics.observe_db("insert_channel_messages_batch", started.elapsed());
        for pending in batch.drain(..) {
            let _ = pending.done.send(result.clone());
        }
    }
}

async fn insert_messages(pool: &Pool, batch: &[PendingMessage]) -> Result<(), StoreError> {
    let client = pool.get().await.map_err(pool_error)?;
    let column = |f: fn(&ChannelMessageRecord) -> String| {
        batch.iter().map(|p| f(&p.message)).collect::<Vec<_>>()
    };
    let ids: Vec<Uuid> = batch.iter().map(|p| p.message.id).collect();
    let senders: Vec<Uuid> = batch.iter().map(|p| p.message.sender_id).collect();
    let codes: Vec<i32> = batch.iter().map(|p| p.message.code).collect();
    let created: Vec<i64> = batch.iter().map(|p| p.message.create_time_ms).collect();
    let updated: Vec<i64> = batch.iter().map(|p| p.message.update_time_ms).collect();
    let channels = column(|m| m.channel_id.clone());
    let usernames = column(|m| m.username.clone());
    let contents = column(|m| m.content.clone());
    // A single statement is a single transaction: all of the batch is durable, or none of it.
    client
        .execute(
            "INSERT INTO channel_messages
                (id, channel_id, code, sender_id, username, content, create_time_ms, update_time_ms)
             SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::int4[], $4::uuid[], $5::text[],
                                  $6::text[], $7::int8[], $8::int8[])",
            &[
                &ids, &channels, &codes, &senders, &usernames, &contents, &created, &updated,
            ],
        )
        .await
        .map_err(db_error)?;
    Ok(())
}

fn history_row(row: &Row, channel_id: &str) -> HistoryRow {
    HistoryRow {
        seq: row.get(0),
        message: ChannelMessageRecord {
            id: row.get(1),
            channel_id: channel_id.to_owned(),
            code: row.get(2),
            sender_id: row.get(3),
            username: row.get(4),
            content: row.get(5),
            create_time_ms: row.get(6),
            update_time_ms: row.get(7),
        },
    }
}

const IDENTITY_COLUMNS: &str = "u.id, u.username, u.disable_time_ms, u.password_hash";

fn identity_sql(credential: &Credential) -> (String, &str) {
    match credential {
        Credential::Device(id) => (
            format!("SELECT {IDENTITY_COLUMNS} FROM user_devices d JOIN users u ON u.id = d.user_id WHERE d.id = $1"),
            id,
        ),
        Credential::Custom(id) => (format!("SELECT {IDENTITY_COLUMNS} FROM users u WHERE u.custom_id = $1"), id),
        Credential::Email(email) => (format!("SELECT {IDENTITY_COLUMNS} FROM users u WHERE u.email = $1"), email),
    }
}

fn identity_from(row: &Row) -> Identity {
    Identity {
        user_id: row.get(0),
        username: row.get(1),
        disabled: row.get::<_, Option<i64>>(2).is_some(),
        password_hash: row.get(3),
    }
}

async fn find_identity(
    client: &impl deadpool_postgres::GenericClient,
    credential: &Credential,
) -> Result<Option<Identity>, StoreError> {
    let (sql, key) = identity_sql(credential);
    let row = client.query_opt(&sql, &[&key]).await.map_err(db_error)?;
    Ok(row.as_ref().map(identity_from))
}

#[async_trait]
impl AccountStore for PostgresStore {
    async fn find_identity(&self, credential: &Credential) -> Result<Option<Identity>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let result = find_identity(&client, credential).await;
        self.metrics.observe_db("find_identity", started.elapsed());
        result
    }

    async fn find_or_create(
        &self,
        credential: &Credential,
        new_user: NewUser,
    ) -> Result<(Identity, bool), StoreError> {
        let started = Instant::now();
        let mut client = self.client().await?;
        // Two callers racing to create the same credential: the loser's insert conflicts, it
        // rolls back and finds the winner's account on the next pass.
        let mut result = Err(StoreError::Database("find_or_create did not run".into()));
        for _ in 0..3 {
            let tx = client.transaction().await.map_err(db_error)?;
            if let Some(found) = find_identity(&tx, credential).await? {
                tx.commit().await.map_err(db_error)?;
                result = Ok((found, false));
                break;
            }
            let (email, custom_id) = match credential {
                Credential::Email(email) => (Some(email.as_str()), None),
                Credential::Custom(id) => (None, Some(id.as_str())),
                Credential::Device(_) => (None, None),
            };
            let inserted = tx
                .execute(
                    "INSERT INTO users (id, username, email, custom_id, password_hash, create_time_ms, update_time_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, $6)
                     ON CONFLICT (email) DO NOTHING",
                    &[&new_user.id, &new_user.username, &email, &custom_id, &new_user.password_hash, &new_user.now_ms],
                )
                .await;
            let inserted = match inserted {
                Ok(n) => n,
                Err(e) if is_unique_violation(&e, "users_custom_id_key") => 0,
                Err(e) => return Err(db_error(e)),
            };
            let linked = match (credential, inserted) {
                (_, 0) => 0,
                (Credential::Device(device_id), _) => tx
                    .execute(
                        "INSERT INTO user_devices (id, user_id) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                        &[device_id, &new_user.id],
                    )
                    .await
                    .map_err(db_error)?,
                _ => 1,
            };
            if linked == 0 {
                tx.rollback().await.map_err(db_error)?;
                continue;
            }
            // The starting wallet and inventory, in the transaction creating the account: an
            // account never exists without them.
            if let Some(grant) = &new_user.grant {
                postgres_economy::grant(&tx, new_user.id, grant, new_user.now_ms).await?;
            }
            tx.commit().await.map_err(db_error)?;
            result = Ok((
                Identity {
                    user_id: new_user.id,
                    username: new_user.username.clone(),
                    disabled: false,
                    password_hash: new_user.password_hash.clone(),
                },
                true,
            ));
            break;
        }
        self.metrics.observe_db("find_or_create", started.elapsed());
        result
    }

    async fn account(&self, user_id: Uuid) -> Result<Option<AccountRecord>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT username, display_name, avatar_url, lang_tag, location, timezone, metadata,
                        email, custom_id, disable_time_ms, create_time_ms, update_time_ms
                 FROM users WHERE id = $1",
                &[&user_id],
            )
            .await
            .map_err(db_error)?;
        let Some(r) = row else { return Ok(None) };
        let devices = client
            .query(
                "SELECT id FROM user_devices WHERE user_id = $1 ORDER BY id",
                &[&user_id],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(|d| d.get(0))
            .collect();
        let wallet = postgres_economy::wallet(&client, user_id).await?;
        self.metrics.observe_db("account", started.elapsed());
        Ok(Some(AccountRecord {
            id: user_id,
            username: r.get(0),
            display_name: r.get(1),
            avatar_url: r.get(2),
            lang_tag: r.get(3),
            location: r.get(4),
            timezone: r.get(5),
            metadata: r.get(6),
            email: r.get(7),
            custom_id: r.get(8),
            devices,
            wallet,
            disable_time_ms: r.get(9),
            create_time_ms: r.get(10),
            update_time_ms: r.get(11),
        }))
    }

    async fn update_account(
        &self,
        user_id: Uuid,
        update: AccountUpdate,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let changed = client
            .execute(
                "UPDATE users SET
                    username = COALESCE($2, username),
                    display_name = COALESCE($3, display_name),
                    avatar_url = COALESCE($4, avatar_url),
                    lang_tag = COALESCE($5, lang_tag),
                    location = COALESCE($6, location),
                    timezone = COALESCE($7, timezone),
                    metadata = COALESCE($8, metadata),
                    update_time_ms = $9
                 WHERE id = $1",
                &[
                    &user_id,
                    &update.username,
                    &update.display_name,
                    &update.avatar_url,
                    &update.lang_tag,
                    &update.location,
                    &update.timezone,
                    &update.metadata,
                    &now_ms,
                ],
            )
            .await
            .map_err(db_error)?;
        self.metrics.observe_db("update_account", started.elapsed());
        if changed == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }
}

#[async_trait]
impl TokenStore for PostgresStore {
    async fn revoke(&self, revocations: Vec<Revocation>) -> Result<(), StoreError> {
        let started = Instant::now();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        for r in &revocations {
            tx.execute(
                "INSERT INTO revoked_tokens (token_id, expires_at) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&r.token_id, &r.expires_at],
            )
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)?;
        self.metrics.observe_db("revoke", started.elapsed());
        Ok(())
    }

    async fn active_revocations(&self, now: i64) -> Result<Vec<Revocation>, StoreError> {
        let client = self.client().await?;
        client
            .execute("DELETE FROM revoked_tokens WHERE expires_at <= $1", &[&now])
            .await
            .map_err(db_error)?;
        let rows = client
            .query("SELECT token_id, expires_at FROM revoked_tokens", &[])
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|r| Revocation {
                token_id: r.get(0),
                expires_at: r.get(1),
            })
            .collect())
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

#[async_trait]
impl ChatStore for PostgresStore {
    async fn insert_channel_message(
        &self,
        message: ChannelMessageRecord,
    ) -> Result<(), StoreError> {
        let started = Instant::now();
        let (done, answered) = oneshot::channel();
        self.messages
            .send(PendingMessage { message, done })
            .await
            .map_err(|_| StoreError::Closed)?;
        let result = answered.await.map_err(|_| StoreError::Closed)?;
        self.metrics
            .observe_db("insert_channel_message", started.elapsed());
        result
    }

    async fn update_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
        content: String,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let row = client
            .query_opt(
                "UPDATE channel_messages SET content = $4, update_time_ms = $5
                 WHERE id = $1 AND sender_id = $2 AND channel_id = $3
                 RETURNING create_time_ms",
                &[&id, &sender, &channel_id, &content, &now_ms],
            )
            .await
            .map_err(db_error)?;
        self.metrics
            .observe_db("update_channel_message", started.elapsed());
        row.map(|r| r.get(0)).ok_or(StoreError::NotFound)
    }

    async fn delete_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
    ) -> Result<i64, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let row = client
            .query_opt(
                "DELETE FROM channel_messages WHERE id = $1 AND sender_id = $2 AND channel_id = $3
                 RETURNING create_time_ms",
                &[&id, &sender, &channel_id],
            )
            .await
            .map_err(db_error)?;
        self.metrics
            .observe_db("delete_channel_message", started.elapsed());
        row.map(|r| r.get(0)).ok_or(StoreError::NotFound)
    }

    async fn channel_messages(&self, query: HistoryQuery) -> Result<Vec<HistoryRow>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let sql = if query.ascending {
            "SELECT seq, id, code, sender_id, username, content, create_time_ms, update_time_ms
             FROM channel_messages WHERE channel_id = $1 AND seq > $2 ORDER BY seq ASC LIMIT $3"
        } else {
            "SELECT seq, id, code, sender_id, username, content, create_time_ms, update_time_ms
             FROM channel_messages WHERE channel_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3"
        };
        let from = query
            .from_seq
            .unwrap_or(if query.ascending { i64::MIN } else { i64::MAX });
        let rows = client
            .query(sql, &[&query.channel_id, &from, &(query.limit as i64)])
            .await
            .map_err(db_error)?;
        self.metrics
            .observe_db("channel_messages", started.elapsed());
        Ok(rows
            .iter()
            .map(|r| history_row(r, &query.channel_id))
            .collect())
    }
}

#[async_trait]
impl EconomyStore for PostgresStore {
    async fn apply_ledger(&self, write: LedgerWrite) -> Result<LedgerOutcome, StoreError> {
        self.writer.apply(write).await
    }

    async fn wallet(&self, user_id: Uuid) -> Result<Vec<(String, i64)>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let result = postgres_economy::wallet(&client, user_id).await;
        self.metrics.observe_db("wallet", started.elapsed());
        result
    }

    async fn inventory(&self, user_id: Uuid) -> Result<Vec<InventoryItem>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let result = postgres_economy::inventory(&client, user_id).await;
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
        self.writer.close().await;
        self.pool.close();
    }
}

fn is_unique_violation(error: &tokio_postgres::Error, constraint: &str) -> bool {
    error.as_db_error().is_some_and(|db| {
        db.code() == &SqlState::UNIQUE_VIOLATION && db.constraint() == Some(constraint)
    })
}
