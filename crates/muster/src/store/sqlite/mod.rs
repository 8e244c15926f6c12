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
mod sync;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use rusqlite::{params, Connection, OpenFlags};
use tokio::sync::{mpsc, oneshot, Semaphore};
use uuid::Uuid;

use self::checkpoint as sqlite_checkpoint;
use self::sync::{Completion, WalSyncer};
use crate::base::metrics::Metrics;
use crate::store::config::StoreConfig;
use crate::store::migrations::{self, Schema, LEDGER_TABLE};
use crate::store::{SecretStore, StoreError};

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

fn database_path(config: &StoreConfig) -> PathBuf {
    config.data_dir.join("muster.sqlite3")
}

/// The one mapping of SQLite's errors to what callers tell apart: a row a foreign key needed
/// that is not there, and everything else. A slice that gives a unique key a meaning of its own
/// maps [`unique_violation`] first.
pub(crate) fn db_error(error: rusqlite::Error) -> StoreError {
    if let rusqlite::Error::SqliteFailure(failure, _) = &error {
        if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY {
            return StoreError::NotFound;
        }
    }
    StoreError::Database(error.to_string())
}

/// The unique key `error` violates, as SQLite names it (`table.column`, or several joined by
/// `, `), when it is a unique or primary key violation.
pub(crate) fn unique_violation(error: &rusqlite::Error) -> Option<&str> {
    match error {
        rusqlite::Error::SqliteFailure(failure, Some(message))
            if failure.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            message.strip_prefix("UNIQUE constraint failed: ")
        }
        _ => None,
    }
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

fn apply_migrations(
    conn: &mut Connection,
    schema: &Schema,
    allowed: bool,
) -> anyhow::Result<(usize, i64)> {
    conn.execute_batch(LEDGER_TABLE)?;
    let applied: i64 = conn.query_row(migrations::APPLIED_VERSION, [], |r| r.get(0))?;
    let pending = migrations::plan(schema, applied, allowed)?;
    let mut version = applied;
    for migration in pending {
        let tx = conn.transaction()?;
        tx.execute_batch(migration.sqlite)?;
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
pub async fn migrate(config: &StoreConfig, schema: &Schema) -> anyhow::Result<(usize, i64)> {
    std::fs::create_dir_all(&config.data_dir)?;
    let path = database_path(config);
    let schema = schema.clone();
    tokio::task::spawn_blocking(move || {
        let mut conn = open_connection(&path, false)?;
        apply_migrations(&mut conn, &schema, true)
    })
    .await?
}

/// Writes a consistent copy of the database to `to` while the server may be running (the
/// `muster backup` command): one read transaction (`VACUUM INTO`), which in WAL mode holds up no
/// writer, so the copy holds exactly the writes committed when it began. `to` must not exist.
/// Answers the copy's size in bytes.
pub async fn backup(config: &StoreConfig, to: &Path) -> anyhow::Result<u64> {
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
    pub async fn open(
        config: &StoreConfig,
        schema: &Schema,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<SqliteStore> {
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            anyhow::anyhow!("cannot create data_dir {}: {e}", config.data_dir.display())
        })?;
        let path = database_path(config);
        let allowed = config.database.migrate_on_start;
        let writer_path = path.clone();
        let schema = schema.clone();
        let conn = tokio::task::spawn_blocking(move || -> anyhow::Result<Connection> {
            let mut conn = open_connection(&writer_path, false)?;
            apply_migrations(&mut conn, &schema, allowed)?;
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
    pub(crate) async fn write<T: Send + 'static>(
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

    /// Runs `f` on a reader connection.
    pub(crate) async fn read<T: Send + 'static>(
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

pub(crate) fn parse_uuid(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text)
        .map_err(|e| StoreError::Database(format!("bad uuid {text:?} in database: {e}")))
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

impl SqliteStore {
    /// Finishes pending writes (the writer drains its queue) and stops the engine's threads.
    pub async fn close(&self) {
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
