//! The embedded engine: SQLite in WAL mode under the data directory.
//!
//! Writes go to one writer thread that owns the only write connection. It takes every write
//! waiting in its queue (up to `database.max_batch`), runs each inside its own savepoint of one
//! transaction, commits once, and answers each caller only once the commit is on disk: a group
//! commit, so one fsync serves a whole batch and every answered write is durable. The fsync runs
//! on its own thread (`sync.rs`) while the writer goes on with the next batch. A write that
//! fails rolls back its own savepoint and leaves the rest of the batch alone.
//!
//! Reads run on a small pool of read-only connections on tokio's blocking threads; WAL lets them
//! proceed while the writer commits.

mod checkpoint;
mod console;
mod economy;
mod friends;
mod groups;
mod leaderboards;
mod lifecycle;
mod links;
mod notifications;
mod storage;
mod sync;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use tokio::sync::{mpsc, oneshot, Semaphore};
use uuid::Uuid;

use self::sync::{Completion, WalSyncer};
use self::{checkpoint as sqlite_checkpoint, economy as sqlite_economy};
use crate::base::config::Config;
use crate::base::metrics::Metrics;
use crate::store::migrations::{self, LEDGER_TABLE};
use crate::store::{
    AccountRecord, AccountStore, AccountUpdate, ChannelMessageRecord, ChatStore, Credential,
    EconomyStore, HistoryQuery, HistoryRow, Identity, InventoryItem, LedgerEntry, LedgerOutcome,
    LedgerWrite, NewUser, Revocation, SecretStore, Store, StoreError, TokenStore,
};

/// Runs one write on the writer's connection, inside a savepoint, and returns its completion.
type WriteJob = Box<dyn FnOnce(&Connection) -> Completion + Send>;

pub struct SqliteStore {
    jobs: Mutex<Option<mpsc::Sender<WriteJob>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Dropping it stops the checkpointer thread.
    checkpointer: Mutex<Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>>,
    readers: Arc<ReaderPool>,
    metrics: Arc<Metrics>,
}

/// The writer connection's page cache, in KiB (SQLite's `cache_size` takes negative KiB): enough
/// to keep the hot wallet and inventory pages in memory. Not larger: a commit after a B-tree
/// split that swapped page numbers (they pass through the pending-byte page as a temporary key)
/// scans the whole cache's hash table, so a bigger cache costs CPU on every such commit. At
/// 20,000 calls/s, 16 MiB against 64 MiB saved ~2 µs per call and lowered p95 in 3 of 3
/// interleaved runs; 8 and 4 MiB were no better than 16.
const WRITER_CACHE_KIB: i64 = -16 * 1024;

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 256;

fn database_path(config: &Config) -> PathBuf {
    config.data_dir.join("muster.sqlite3")
}

/// The one mapping of SQLite's errors to what domain code tells apart: a taken username, a row
/// a foreign key needed that is not there, and everything else.
pub(super) fn db_error(error: rusqlite::Error) -> StoreError {
    if let rusqlite::Error::SqliteFailure(failure, message) = &error {
        if failure.code == rusqlite::ErrorCode::ConstraintViolation
            && message
                .as_deref()
                .is_some_and(|m| m.contains("users.username"))
        {
            return StoreError::UsernameTaken;
        }
        if failure.code == rusqlite::ErrorCode::ConstraintViolation
            && message.as_deref().is_some_and(|m| {
                ["users.email", "users.custom_id", "user_devices.id"]
                    .iter()
                    .any(|column| m.contains(column))
            })
        {
            return StoreError::CredentialTaken;
        }
        if failure.code == rusqlite::ErrorCode::ConstraintViolation
            && message
                .as_deref()
                .is_some_and(|m| m.contains("groups.name"))
        {
            return StoreError::Group(crate::store::groups::GroupRefusal::NameInUse);
        }
        if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY {
            return StoreError::NotFound;
        }
    }
    StoreError::Database(error.to_string())
}

fn open_connection(path: &Path, read_only: bool) -> rusqlite::Result<Connection> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags)?;
    // Every domain's statements stay prepared (rusqlite keeps 16 by default: fewer than the
    // reads of one busy mix, which then parse their SQL again on every call).
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.busy_timeout(Duration::from_secs(5))?;
    if !read_only {
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    // FULL: the WAL is fsynced at every commit, so an answered write survives power loss too.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

fn apply_migrations(conn: &mut Connection, allowed: bool) -> anyhow::Result<(usize, i64)> {
    conn.execute_batch(LEDGER_TABLE)?;
    let applied: i64 = conn.query_row(migrations::APPLIED_VERSION, [], |r| r.get(0))?;
    let pending = migrations::plan(migrations::SQLITE, applied, allowed)?;
    let mut version = applied;
    for migration in pending {
        let tx = conn.transaction()?;
        tx.execute_batch(migration.sql)?;
        tx.execute(
            "INSERT INTO muster_migrations (version, name, applied_at_ms) VALUES (?1, ?2, ?3)",
            params![
                migration.version,
                migration.name,
                crate::base::clock::now_ms()
            ],
        )?;
        tx.commit()?;
        migrations::applied(migration);
        version = migration.version;
    }
    Ok((pending.len(), version))
}

/// Applies pending migrations (the `muster migrate` command).
pub async fn migrate(config: &Config) -> anyhow::Result<(usize, i64)> {
    std::fs::create_dir_all(&config.data_dir)?;
    let path = database_path(config);
    tokio::task::spawn_blocking(move || {
        let mut conn = open_connection(&path, false)?;
        apply_migrations(&mut conn, true)
    })
    .await?
}

/// Writes a consistent copy of the database to `to` while the server may be running (the
/// `muster backup` command): one read transaction (`VACUUM INTO`), which in WAL mode holds up no
/// writer, so the copy holds exactly the writes committed when it began. `to` must not exist.
/// Answers the copy's size in bytes.
pub async fn backup(config: &Config, to: &Path) -> anyhow::Result<u64> {
    let path = database_path(config);
    if !path.exists() {
        anyhow::bail!("no database at {}", path.display());
    }
    if to.exists() {
        anyhow::bail!("{} exists: a backup never overwrites a file", to.display());
    }
    let to = to.to_path_buf();
    tokio::task::spawn_blocking(move || -> anyhow::Result<u64> {
        let conn = open_connection(&path, true)?;
        let target = to
            .to_str()
            .ok_or_else(|| anyhow::anyhow!("{} is not UTF-8", to.display()))?;
        conn.execute("VACUUM INTO ?1", params![target])?;
        Ok(std::fs::metadata(&to)?.len())
    })
    .await?
}

impl SqliteStore {
    pub async fn open(config: &Config, metrics: Arc<Metrics>) -> anyhow::Result<SqliteStore> {
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            anyhow::anyhow!("cannot create data_dir {}: {e}", config.data_dir.display())
        })?;
        let path = database_path(config);
        let allowed = config.database.migrate_on_start;
        let writer_path = path.clone();
        let conn = tokio::task::spawn_blocking(move || -> anyhow::Result<Connection> {
            let mut conn = open_connection(&writer_path, false)?;
            apply_migrations(&mut conn, allowed)?;
            // Checkpoints run on their own thread (see `sqlite_checkpoint`), never inside a
            // group commit; the writer keeps the hot pages of its tables in its own cache.
            conn.pragma_update(None, "wal_autocheckpoint", 0)?;
            conn.pragma_update(None, "cache_size", WRITER_CACHE_KIB)?;
            // COMMIT writes the WAL frames without an fsync; the syncer thread fsyncs them
            // before any caller is answered (see `sync.rs`).
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            Ok(conn)
        })
        .await??;
        let (stop_checkpoints, stopped) = std::sync::mpsc::channel();
        let checkpoint_path = path.clone();
        let rewind = Arc::new(sqlite_checkpoint::Rewind::default());
        let checkpointer_rewind = rewind.clone();
        let checkpointer = std::thread::Builder::new()
            .name("muster-sqlite-checkpoint".into())
            .spawn(move || {
                sqlite_checkpoint::run(checkpoint_path, stopped, &checkpointer_rewind, |p| {
                    open_connection(p, false)
                })
            })?;
        // Writes queued beyond this make callers wait (backpressure) instead of growing memory.
        let (jobs, queue) = mpsc::channel(config.database.write_queue_size);
        let max_batch = config.database.max_batch;
        let writer_metrics = metrics.clone();
        let syncer = WalSyncer::start(&path)?;
        let writer = std::thread::Builder::new()
            .name("muster-sqlite-writer".into())
            .spawn(move || write_loop(conn, queue, max_batch, &writer_metrics, &rewind, syncer))?;
        tracing::info!(path = %path.display(), "SQLite store open");
        Ok(SqliteStore {
            jobs: Mutex::new(Some(jobs)),
            writer: Mutex::new(Some(writer)),
            checkpointer: Mutex::new(Some((stop_checkpoints, checkpointer))),
            readers: Arc::new(ReaderPool::new(
                path,
                config.database.read_connections,
                config.database.sqlite_reader_mmap_mb,
            )),
            metrics,
        })
    }

    /// Runs `f` in the next group commit and answers once that commit is durable.
    async fn write<T: Send + 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let jobs = self.jobs.lock().clone().ok_or(StoreError::Closed)?;
        let (answer, answered) = oneshot::channel();
        let job: WriteJob = Box::new(move |conn: &Connection| {
            let result = in_savepoint(conn, f);
            Box::new(move |commit: Result<(), StoreError>| {
                let _ = answer.send(commit.and(result));
            })
        });
        self.metrics.db_writes_queued.inc();
        if jobs.send(job).await.is_err() {
            self.metrics.db_writes_queued.dec();
            return Err(StoreError::Closed);
        }
        let result = answered.await.map_err(|_| StoreError::Closed)?;
        self.metrics.observe_db(op, started.elapsed());
        result
    }

    async fn read<T: Send + 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let result = self.readers.run(f).await;
        self.metrics.observe_db(op, started.elapsed());
        result
    }
}

fn in_savepoint<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    // Prepared once and cached: parsing these three statements for every write cost more than
    // some writes themselves.
    let run = |sql: &str| {
        conn.prepare_cached(sql)
            .and_then(|mut s| s.execute([]))
            .map_err(db_error)
    };
    run("SAVEPOINT job")?;
    let result = f(conn);
    if result.is_err() {
        run("ROLLBACK TO job")?;
    }
    run("RELEASE job")?;
    result
}

fn write_loop(
    conn: Connection,
    mut queue: mpsc::Receiver<WriteJob>,
    max_batch: usize,
    metrics: &Metrics,
    rewind: &sqlite_checkpoint::Rewind,
    syncer: WalSyncer,
) {
    let mut batch = Vec::with_capacity(max_batch);
    while let Some(first) = queue.blocking_recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        metrics.db_batch_size.observe(batch.len() as f64);
        metrics.db_writes_queued.sub(batch.len() as i64);
        if let Err(error) = conn.execute_batch("BEGIN IMMEDIATE") {
            let error = db_error(error);
            for job in batch.drain(..) {
                // Never run: answer with the failure to begin.
                drop(job);
            }
            tracing::error!(%error, "cannot begin a write transaction");
            continue;
        }
        let completions: Vec<Completion> = batch.drain(..).map(|job| job(&conn)).collect();
        let commit = conn.execute_batch("COMMIT").map_err(db_error);
        if let Err(error) = &commit {
            tracing::error!(%error, "group commit failed");
            let _ = conn.execute_batch("ROLLBACK");
        }
        syncer.committed(commit, completions);
        // Between two transactions is the one moment the WAL can be rewound without waiting.
        rewind.if_wanted(&conn);
    }
    syncer.finish();
    // All senders are gone: every queued write has been answered. Fold the WAL into the
    // database file so the next start does not replay it.
    if let Err(error) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
        tracing::warn!(%error, "WAL checkpoint at close failed");
    }
}

/// Read-only connections shared by the blocking threads, at most `size` in use at once.
struct ReaderPool {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
    /// `mmap_size` of each read connection, in bytes (0: reads copy pages with `pread`).
    mmap_bytes: i64,
}

impl ReaderPool {
    fn new(path: PathBuf, size: usize, mmap_mb: u64) -> Self {
        ReaderPool {
            path,
            idle: Mutex::new(Vec::with_capacity(size)),
            permits: Arc::new(Semaphore::new(size)),
            mmap_bytes: i64::try_from(mmap_mb.saturating_mul(1 << 20)).unwrap_or(i64::MAX),
        }
    }

    fn open(&self) -> rusqlite::Result<Connection> {
        let conn = open_connection(&self.path, true)?;
        if self.mmap_bytes > 0 {
            conn.pragma_update(None, "mmap_size", self.mmap_bytes)?;
        }
        Ok(conn)
    }

    async fn run<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Closed)?;
        let pool = self.clone();
        tokio::task::spawn_blocking(move || {
            let idle = pool.idle.lock().pop();
            let conn = match idle {
                Some(conn) => conn,
                None => pool.open().map_err(db_error)?,
            };
            let result = f(&conn);
            pool.idle.lock().push(conn);
            drop(permit);
            result
        })
        .await
        .map_err(|e| StoreError::Database(e.to_string()))?
    }
}

const IDENTITY_COLUMNS: &str = "u.id, u.username, u.disable_time_ms, u.password_hash";

fn find_identity(
    conn: &Connection,
    credential: &Credential,
) -> Result<Option<Identity>, StoreError> {
    let (sql, key) = match credential {
        Credential::Device(id) => (
            format!("SELECT {IDENTITY_COLUMNS} FROM user_devices d JOIN users u ON u.id = d.user_id WHERE d.id = ?1"),
            id,
        ),
        Credential::Custom(id) => (format!("SELECT {IDENTITY_COLUMNS} FROM users u WHERE u.custom_id = ?1"), id),
        Credential::Email(email) => (format!("SELECT {IDENTITY_COLUMNS} FROM users u WHERE u.email = ?1"), email),
    };
    let mut statement = conn.prepare_cached(&sql).map_err(db_error)?;
    statement
        .query_row([key], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Option<i64>>(2)?,
                row.get::<_, Option<String>>(3)?,
            ))
        })
        .optional()
        .map_err(db_error)?
        .map(|(id, username, disabled, password_hash)| {
            Ok(Identity {
                user_id: parse_uuid(&id)?,
                username,
                disabled: disabled.is_some(),
                password_hash,
            })
        })
        .transpose()
}

fn parse_uuid(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text)
        .map_err(|e| StoreError::Database(format!("bad uuid {text:?} in database: {e}")))
}

#[async_trait]
impl AccountStore for SqliteStore {
    async fn find_identity(&self, credential: &Credential) -> Result<Option<Identity>, StoreError> {
        let credential = credential.clone();
        self.read("find_identity", move |conn| {
            find_identity(conn, &credential)
        })
        .await
    }

    async fn find_or_create(
        &self,
        credential: &Credential,
        new_user: NewUser,
    ) -> Result<(Identity, bool), StoreError> {
        let credential = credential.clone();
        self.write("find_or_create", move |conn| {
            if let Some(found) = find_identity(conn, &credential)? {
                return Ok((found, false));
            }
            let (email, custom_id) = match &credential {
                Credential::Email(email) => (Some(email.as_str()), None),
                Credential::Custom(id) => (None, Some(id.as_str())),
                Credential::Device(_) => (None, None),
            };
            let id = new_user.id.to_string();
            conn.prepare_cached(
                "INSERT INTO users (id, username, email, custom_id, password_hash, create_time_ms, update_time_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
            )
            .and_then(|mut s| {
                s.execute(params![id, new_user.username, email, custom_id, new_user.password_hash, new_user.now_ms])
            })
            .map_err(db_error)?;
            if let Credential::Device(device_id) = &credential {
                conn.prepare_cached("INSERT INTO user_devices (id, user_id) VALUES (?1, ?2)")
                    .and_then(|mut s| s.execute(params![device_id, id]))
                    .map_err(db_error)?;
            }
            // The starting wallet and inventory, in the same savepoint as the account: an
            // account never exists without them.
            if let Some(grant) = &new_user.grant {
                sqlite_economy::grant(conn, new_user.id, grant, new_user.now_ms)?;
            }
            Ok((
                Identity {
                    user_id: new_user.id,
                    username: new_user.username,
                    disabled: false,
                    password_hash: new_user.password_hash,
                },
                true,
            ))
        })
        .await
    }

    async fn account(&self, user_id: Uuid) -> Result<Option<AccountRecord>, StoreError> {
        self.read("account", move |conn| {
            let id = user_id.to_string();
            let record = conn
                .prepare_cached(
                    "SELECT username, display_name, avatar_url, lang_tag, location, timezone, metadata,
                            email, custom_id, disable_time_ms, create_time_ms, update_time_ms
                     FROM users WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.query_row([&id], |r| {
                        Ok(AccountRecord {
                            id: user_id,
                            username: r.get(0)?,
                            display_name: r.get(1)?,
                            avatar_url: r.get(2)?,
                            lang_tag: r.get(3)?,
                            location: r.get(4)?,
                            timezone: r.get(5)?,
                            metadata: r.get(6)?,
                            email: r.get(7)?,
                            custom_id: r.get(8)?,
                            devices: Vec::new(),
                            wallet: Vec::new(),
                            disable_time_ms: r.get(9)?,
                            create_time_ms: r.get(10)?,
                            update_time_ms: r.get(11)?,
                        })
                    })
                    .optional()
                })
                .map_err(db_error)?;
            let Some(mut record) = record else { return Ok(None) };
            let mut devices = conn
                .prepare_cached("SELECT id FROM user_devices WHERE user_id = ?1 ORDER BY id")
                .map_err(db_error)?;
            record.devices = devices
                .query_map([&id], |r| r.get(0))
                .and_then(|rows| rows.collect::<Result<Vec<String>, _>>())
                .map_err(db_error)?;
            record.wallet = sqlite_economy::wallet(conn, user_id)?;
            Ok(Some(record))
        })
        .await
    }

    async fn update_account(
        &self,
        user_id: Uuid,
        update: AccountUpdate,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.write("update_account", move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE users SET
                        username = COALESCE(?2, username),
                        display_name = COALESCE(?3, display_name),
                        avatar_url = COALESCE(?4, avatar_url),
                        lang_tag = COALESCE(?5, lang_tag),
                        location = COALESCE(?6, location),
                        timezone = COALESCE(?7, timezone),
                        metadata = COALESCE(?8, metadata),
                        update_time_ms = ?9
                     WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        user_id.to_string(),
                        update.username,
                        update.display_name,
                        update.avatar_url,
                        update.lang_tag,
                        update.location,
                        update.timezone,
                        update.metadata,
                        now_ms
                    ])
                })
                .map_err(db_error)?;
            if changed == 0 {
                return Err(StoreError::NotFound);
            }
            Ok(())
        })
        .await
    }

    async fn set_disabled(
        &self,
        user_ids: Vec<Uuid>,
        disable_time_ms: Option<i64>,
    ) -> Result<Vec<Uuid>, StoreError> {
        self.write("set_disabled", move |conn| {
            let mut update = conn
                .prepare_cached("UPDATE users SET disable_time_ms = ?2 WHERE id = ?1")
                .map_err(db_error)?;
            let mut found = Vec::with_capacity(user_ids.len());
            for id in user_ids {
                if update
                    .execute(params![id.to_string(), disable_time_ms])
                    .map_err(db_error)?
                    > 0
                {
                    found.push(id);
                }
            }
            Ok(found)
        })
        .await
    }

    async fn disabled_users(&self, deleted_since_ms: i64) -> Result<Vec<Uuid>, StoreError> {
        self.read("disabled_users", move |conn| {
            lifecycle::disabled_users(conn, deleted_since_ms)
        })
        .await
    }

    async fn link(
        &self,
        user_id: Uuid,
        credential: Credential,
        password_hash: Option<String>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.write("link", move |conn| {
            lifecycle::link(conn, user_id, &credential, password_hash.as_deref(), now_ms)
        })
        .await
    }

    async fn unlink(
        &self,
        user_id: Uuid,
        credential: Credential,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        self.write("unlink", move |conn| {
            lifecycle::unlink(conn, user_id, &credential, now_ms)
        })
        .await
    }

    async fn users(
        &self,
        ids: Vec<Uuid>,
        usernames: Vec<String>,
    ) -> Result<Vec<AccountRecord>, StoreError> {
        self.read("users", move |conn| {
            lifecycle::users(conn, &ids, &usernames)
        })
        .await
    }

    async fn delete_account(&self, user_id: Uuid, now_ms: i64) -> Result<bool, StoreError> {
        self.write("delete_account", move |conn| {
            lifecycle::delete_account(conn, user_id, now_ms)
        })
        .await
    }
}

#[async_trait]
impl TokenStore for SqliteStore {
    async fn revoke(&self, revocations: Vec<Revocation>) -> Result<usize, StoreError> {
        self.write("revoke", move |conn| {
            let mut insert = conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO revoked_tokens (token_id, expires_at, created_ms)
                     VALUES (?1, ?2, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
                )
                .map_err(db_error)?;
            let mut recorded = 0;
            for r in &revocations {
                recorded += insert
                    .execute(params![r.token_id.to_string(), r.expires_at])
                    .map_err(db_error)?;
            }
            Ok(recorded)
        })
        .await
    }

    async fn is_revoked(&self, token_id: Uuid) -> Result<bool, StoreError> {
        self.read("is_revoked", move |conn| {
            conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM revoked_tokens WHERE token_id = ?1)")
                .and_then(|mut s| s.query_row(params![token_id.to_string()], |r| r.get(0)))
                .map_err(db_error)
        })
        .await
    }

    async fn revocations_since(
        &self,
        since_ms: i64,
        now: i64,
    ) -> Result<(Vec<(Revocation, i64)>, i64), StoreError> {
        self.read("revocations_since", move |conn| {
            let clock: i64 = conn
                .query_row(
                    "SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
                    [],
                    |r| r.get(0),
                )
                .map_err(db_error)?;
            let mut select = conn
                .prepare_cached(
                    "SELECT token_id, expires_at, created_ms FROM revoked_tokens
                     WHERE created_ms >= ?1 AND expires_at > ?2",
                )
                .map_err(db_error)?;
            let rows = select
                .query_map([since_ms, now], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                    ))
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(db_error)?;
            let revocations = rows
                .into_iter()
                .map(|(id, expires_at, created_ms)| {
                    let token_id = parse_uuid(&id)?;
                    Ok((
                        Revocation {
                            token_id,
                            expires_at,
                        },
                        created_ms,
                    ))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok((revocations, clock))
        })
        .await
    }

    async fn prune_revocations(&self, now: i64) -> Result<(), StoreError> {
        self.write("prune_revocations", move |conn| {
            conn.execute("DELETE FROM revoked_tokens WHERE expires_at <= ?1", [now])
                .map_err(db_error)?;
            Ok(())
        })
        .await
    }
}

#[async_trait]
impl SecretStore for SqliteStore {
    async fn secret(&self, name: &str, candidate: String) -> Result<String, StoreError> {
        let name = name.to_string();
        self.write("secret", move |conn| {
            conn.execute(
                "INSERT OR IGNORE INTO secrets (name, value) VALUES (?1, ?2)",
                params![name, candidate],
            )
            .map_err(db_error)?;
            conn.query_row("SELECT value FROM secrets WHERE name = ?1", [&name], |r| {
                r.get(0)
            })
            .map_err(db_error)
        })
        .await
    }
}

#[async_trait]
impl ChatStore for SqliteStore {
    async fn insert_channel_message(
        &self,
        message: ChannelMessageRecord,
    ) -> Result<(), StoreError> {
        // One write job per message; the writer commits every job waiting in its queue in one
        // transaction, so concurrent messages share one fsync.
        self.write("insert_channel_message", move |conn| {
            conn.prepare_cached(
                "INSERT INTO channel_messages
                    (id, channel_id, code, sender_id, username, content, create_time_ms, update_time_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    message.id.to_string(),
                    message.channel_id,
                    message.code,
                    message.sender_id.to_string(),
                    message.username,
                    message.content,
                    message.create_time_ms,
                    message.update_time_ms
                ])
            })
            .map_err(db_error)?;
            Ok(())
        })
        .await
    }

    async fn update_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
        content: String,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        let channel_id = channel_id.to_owned();
        self.write("update_channel_message", move |conn| {
            conn.prepare_cached(
                "UPDATE channel_messages SET content = ?4, update_time_ms = ?5
                 WHERE id = ?1 AND sender_id = ?2 AND channel_id = ?3
                 RETURNING create_time_ms",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![
                        id.to_string(),
                        sender.to_string(),
                        channel_id,
                        content,
                        now_ms
                    ],
                    |r| r.get(0),
                )
                .optional()
            })
            .map_err(db_error)?
            .ok_or(StoreError::NotFound)
        })
        .await
    }

    async fn delete_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
    ) -> Result<i64, StoreError> {
        let channel_id = channel_id.to_owned();
        self.write("delete_channel_message", move |conn| {
            conn.prepare_cached(
                "DELETE FROM channel_messages WHERE id = ?1 AND sender_id = ?2 AND channel_id = ?3
                 RETURNING create_time_ms",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![id.to_string(), sender.to_string(), channel_id],
                    |r| r.get(0),
                )
                .optional()
            })
            .map_err(db_error)?
            .ok_or(StoreError::NotFound)
        })
        .await
    }

    async fn channel_messages(&self, query: HistoryQuery) -> Result<Vec<HistoryRow>, StoreError> {
        self.read("channel_messages", move |conn| {
            let sql = if query.ascending {
                "SELECT seq, id, code, sender_id, username, content, create_time_ms,
                        update_time_ms, channel_id
                 FROM channel_messages WHERE channel_id = ?1 AND seq > ?2 ORDER BY seq ASC LIMIT ?3"
            } else {
                "SELECT seq, id, code, sender_id, username, content, create_time_ms,
                        update_time_ms, channel_id
                 FROM channel_messages WHERE channel_id = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3"
            };
            let from = query
                .from_seq
                .unwrap_or(if query.ascending { i64::MIN } else { i64::MAX });
            history_rows(
                conn,
                sql,
                params![query.channel_id, from, query.limit as i64],
            )
        })
        .await
    }

    async fn sender_messages(
        &self,
        sender: Uuid,
        before_seq: Option<i64>,
        limit: usize,
    ) -> Result<Vec<HistoryRow>, StoreError> {
        self.read("sender_messages", move |conn| {
            history_rows(
                conn,
                "SELECT seq, id, code, sender_id, username, content, create_time_ms,
                        update_time_ms, channel_id
                 FROM channel_messages WHERE sender_id = ?1 AND seq < ?2
                 ORDER BY seq DESC LIMIT ?3",
                params![
                    sender.to_string(),
                    before_seq.unwrap_or(i64::MAX),
                    limit as i64
                ],
            )
        })
        .await
    }
}

/// The history rows `sql` selects (seq, id, code, sender, username, content, created, updated,
/// channel).
fn history_rows(
    conn: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<HistoryRow>, StoreError> {
    type Columns = (i64, String, i32, String, String, String, i64, i64, String);
    let mut statement = conn.prepare_cached(sql).map_err(db_error)?;
    let rows: Vec<Columns> = statement
        .query_map(args, |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
            ))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(db_error)?;
    rows.into_iter()
        .map(
            |(seq, id, code, sender, username, content, created, updated, channel_id)| {
                Ok(HistoryRow {
                    seq,
                    message: ChannelMessageRecord {
                        id: parse_uuid(&id)?,
                        channel_id,
                        code,
                        sender_id: parse_uuid(&sender)?,
                        username,
                        content,
                        create_time_ms: created,
                        update_time_ms: updated,
                    },
                })
            },
        )
        .collect()
}

#[async_trait]
impl EconomyStore for SqliteStore {
    async fn apply_ledger(&self, write: LedgerWrite) -> Result<LedgerOutcome, StoreError> {
        self.write("apply_ledger", move |conn| {
            sqlite_economy::apply(conn, &write)
        })
        .await
    }

    async fn wallet(&self, user_id: Uuid) -> Result<Vec<(String, i64)>, StoreError> {
        self.read("wallet", move |conn| sqlite_economy::wallet(conn, user_id))
            .await
    }

    async fn inventory(
        &self,
        user_id: Uuid,
        after: Option<String>,
        limit: usize,
    ) -> Result<Vec<InventoryItem>, StoreError> {
        self.read("inventory", move |conn| {
            sqlite_economy::inventory(conn, user_id, after.as_deref(), limit)
        })
        .await
    }

    async fn ledger(
        &self,
        user_id: Uuid,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        self.read("ledger", move |conn| {
            sqlite_economy::ledger(conn, user_id, before, limit)
        })
        .await
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn close(&self) {
        let checkpointer = self.checkpointer.lock().take();
        if let Some((stop, thread)) = checkpointer {
            drop(stop);
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        // Dropping the last sender ends the writer loop once its queue is empty.
        self.jobs.lock().take();
        let writer = self.writer.lock().take();
        if let Some(writer) = writer {
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        }
    }
}
