//! Group commit on PostgreSQL, for every write path.
//!
//! # Writers
//!
//! [`Writers`] owns `database.writer_connections` dedicated connections, each with its own queue
//! and task. A write goes to the connection its key picks (an account's id, a chat channel, a
//! credential…), so the writes of one account or one channel run on one connection, in the
//! order they were queued, while other keys commit in parallel on the others. Reads use the pool
//! and never wait behind a writer.
//!
//! # One pipeline, one transaction, one fsync
//!
//! A writer takes every write waiting in its queue (up to `database.max_batch`), sends `BEGIN`,
//! each write's prepared statement and nothing else in one pipeline (one network round trip for
//! the whole batch, the statements running back to back in one transaction), then `COMMIT`: one
//! fsync for the batch. Only after the commit does it answer the callers, so every answered
//! write is durable (`synchronous_commit` is left as the server has it: on by default).
//!
//! Every write is one statement ([`Write::SQL`]) that does all of its work, checks included,
//! and reports a refusal (insufficient funds, a credential already taken…) as a result row
//! rather than an SQL error, so a refusal leaves the transaction healthy.
//!
//! # A failing write fails alone
//!
//! Why not a savepoint per write: each savepoint that writes is a subtransaction, and past 64 of
//! them in one transaction PostgreSQL's subtransaction cache overflows and every other session's
//! snapshots get slower. Instead, when a statement of a batch fails (a unique violation, a
//! deadlock with another node), the batch is rolled back, the failing write runs alone in its own
//! transaction (retried a few times when the error may pass), and the rest is committed again
//! without it: one bad write never fails its neighbours.
//!
//! # When PostgreSQL goes away
//!
//! A batch whose connection breaks before COMMIT is answered with [`StoreError::Unavailable`]
//! (nothing of it was committed); one whose COMMIT got no answer is answered the same way, since
//! its fate is unknown (the write paths are idempotent or report an existing row on retry).
//! The next batch reconnects, so the server recovers by itself when PostgreSQL is back.

use std::any::{type_name, Any};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::{join, join_all};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls, Row, Statement};

use super::{db_error_ref, is_connection_error};
use crate::base::metrics::Metrics;
use crate::store::StoreError;

/// One kind of write: its statement, its parameters and how its result rows read.
pub(crate) trait Write: Send + Sync + 'static {
    type Output: Send + Sync + 'static;
    /// The write path's name in metrics (`db_operation_duration_seconds{op}`).
    const PATH: &'static str;
    /// One statement doing the whole write; prepared once per writer connection.
    const SQL: &'static str;
    /// The parameter types of [`Write::SQL`].
    const TYPES: &'static [Type];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)>;

    /// The caller's answer from the statement's rows. An error here counts as the write failing:
    /// the batch is committed without it.
    fn outcome(&self, rows: Vec<Row>) -> Result<Self::Output, StoreError>;

    /// Whether running the write alone again may succeed after `error`.
    fn retryable(&self, error: &tokio_postgres::Error) -> bool {
        is_retryable(error)
    }

    /// What a database error of this write means to its caller.
    fn error(&self, error: &tokio_postgres::Error) -> StoreError {
        db_error_ref(error)
    }
}

/// One statement waiting for its writer, type-erased so one batch mixes every path: a
/// [`Write`] (through [`Writers::write`]), or a job that runs several writes in one statement
/// (through [`Writers::submit`]).
pub(crate) trait Job: Send + Sync + Any {
    fn sql(&self) -> (&'static str, &'static [Type]);
    fn params(&self) -> Vec<&(dyn ToSql + Sync)>;
    /// Reads the write's rows and keeps the outcome for [`Job::answer`].
    fn take(&mut self, rows: Vec<Row>) -> Result<(), StoreError>;
    fn error(&self, error: &tokio_postgres::Error) -> StoreError;
    fn retryable(&self, error: &tokio_postgres::Error) -> bool;
    /// Answers the caller: the kept outcome, or `error`.
    fn answer(self: Box<Self>, error: Option<StoreError>);

    /// Takes `next` (queued after this job, on this writer) into this job's statement, or gives
    /// it back. Only a job of the same kind that touches none of this job's rows may join, so
    /// running it earlier than queued changes nothing another write could see.
    fn absorb(&mut self, next: Box<dyn Job>) -> Result<(), Box<dyn Job>> {
        Err(next)
    }

    /// The job's writes as jobs of one write each, to run apart when the statement failed.
    fn split(self: Box<Self>) -> Vec<Box<dyn Job>>;

    fn as_any(&self) -> &dyn Any;

    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

struct Pending<W: Write> {
    write: W,
    outcome: Option<W::Output>,
    answer: oneshot::Sender<Result<W::Output, StoreError>>,
}

impl<W: Write> Job for Pending<W> {
    fn sql(&self) -> (&'static str, &'static [Type]) {
        (W::SQL, W::TYPES)
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.write.params()
    }

    fn take(&mut self, rows: Vec<Row>) -> Result<(), StoreError> {
        self.outcome = Some(self.write.outcome(rows)?);
        Ok(())
    }

    fn error(&self, error: &tokio_postgres::Error) -> StoreError {
        self.write.error(error)
    }

    fn retryable(&self, error: &tokio_postgres::Error) -> bool {
        self.write.retryable(error)
    }

    fn split(self: Box<Self>) -> Vec<Box<dyn Job>> {
        vec![self]
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }

    fn answer(self: Box<Self>, error: Option<StoreError>) {
        let result = match (error, self.outcome) {
            (Some(error), _) => Err(error),
            (None, Some(outcome)) => Ok(outcome),
            (None, None) => Err(StoreError::Database(format!(
                "{} was not run",
                type_name::<W>()
            ))),
        };
        let _ = self.answer.send(result);
    }
}

/// Settings of the writers (from `[database]`).
pub(crate) struct WriterSettings {
    pub connections: usize,
    pub max_batch: usize,
    /// Writes waiting per connection before callers wait too (backpressure).
    pub queue: usize,
}

type Queue = mpsc::Sender<Box<dyn Job>>;

/// The group-commit writers; see the module documentation.
pub(crate) struct Writers {
    /// One queue per writer connection; taken on close.
    queues: Mutex<Option<Vec<Queue>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    metrics: Arc<Metrics>,
}

/// The partition key of a value: the same value always picks the same writer.
pub(crate) fn key_of(value: impl Hash) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

impl Writers {
    /// Connects every writer (so a wrong URL fails the start) and starts their tasks.
    pub async fn start(
        pg_config: tokio_postgres::Config,
        settings: WriterSettings,
        metrics: Arc<Metrics>,
    ) -> Result<Writers, StoreError> {
        let mut queues = Vec::with_capacity(settings.connections);
        let mut tasks = Vec::with_capacity(settings.connections);
        for _ in 0..settings.connections {
            let connection = WriterConnection::open(&pg_config).await?;
            let (queue, rx) = mpsc::channel(settings.queue);
            queues.push(queue);
            tasks.push(tokio::spawn(write_loop(
                pg_config.clone(),
                Some(connection),
                rx,
                settings.max_batch,
                metrics.clone(),
            )));
        }
        Ok(Writers {
            queues: Mutex::new(Some(queues)),
            tasks: Mutex::new(tasks),
            metrics,
        })
    }

    /// Queues `write` on the writer `key` picks and answers once its batch's commit is durable.
    pub async fn write<W: Write>(&self, key: u64, write: W) -> Result<W::Output, StoreError> {
        let started = Instant::now();
        let (answer, answered) = oneshot::channel();
        let job = Box::new(Pending {
            write,
            outcome: None,
            answer,
        });
        self.submit(key, job).await?;
        let result = answered.await.map_err(|_| StoreError::Closed)?;
        self.metrics.observe_db(W::PATH, started.elapsed());
        result
    }

    /// Queues `job` on the writer `key` picks; the job answers its callers itself.
    pub async fn submit(&self, key: u64, job: Box<dyn Job>) -> Result<(), StoreError> {
        let queue = {
            let queues = self.queues.lock();
            let queues = queues.as_ref().ok_or(StoreError::Closed)?;
            queues[(key % queues.len() as u64) as usize].clone()
        };
        self.metrics.db_writes_queued.inc();
        if queue.send(job).await.is_err() {
            self.metrics.db_writes_queued.dec();
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    /// Stops taking writes, finishes the queued ones and waits for every writer to end.
    pub async fn close(&self) {
        self.queues.lock().take();
        let tasks = std::mem::take(&mut *self.tasks.lock());
        for task in tasks {
            let _ = task.await;
        }
    }
}

/// A writer's own connection and the statements prepared on it.
struct WriterConnection {
    client: Client,
    prepared: HashMap<&'static str, Statement>,
}

impl WriterConnection {
    async fn open(pg_config: &tokio_postgres::Config) -> Result<WriterConnection, StoreError> {
        let (client, connection) = pg_config
            .connect(NoTls)
            .await
            .map_err(|e| db_error_ref(&e))?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::warn!(%error, "PostgreSQL writer connection ended");
            }
        });
        // The writers' statements are few, run thousands of times a second (planning each run
        // would cost more than running it), and find every table row by key. Plan each once, and
        // never as a table scan: a plan made while the tables were small (a fresh database) would
        // otherwise keep scanning them once they are large.
        client
            .batch_execute("SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off")
            .await
            .map_err(|e| db_error_ref(&e))?;
        Ok(WriterConnection {
            client,
            prepared: HashMap::new(),
        })
    }

    /// Prepares, once per connection, every statement `batch` uses.
    async fn prepare(&mut self, batch: &[Box<dyn Job>]) -> Result<(), tokio_postgres::Error> {
        for job in batch {
            let (sql, types) = job.sql();
            if !self.prepared.contains_key(sql) {
                let statement = self.client.prepare_typed(sql, types).await?;
                self.prepared.insert(sql, statement);
            }
        }
        Ok(())
    }

    fn statement(&self, job: &dyn Job) -> &Statement {
        &self.prepared[job.sql().0]
    }
}

/// Whether running the write again may succeed: a lock conflict with another connection, or
/// losing a race to insert the same key (the next run then finds the winner's row).
pub(crate) fn is_retryable(error: &tokio_postgres::Error) -> bool {
    error.code().is_some_and(|code| {
        code == &SqlState::T_R_DEADLOCK_DETECTED
            || code == &SqlState::T_R_SERIALIZATION_FAILURE
            || code == &SqlState::UNIQUE_VIOLATION
    })
}

async fn write_loop(
    pg_config: tokio_postgres::Config,
    mut connection: Option<WriterConnection>,
    mut rx: mpsc::Receiver<Box<dyn Job>>,
    max_batch: usize,
    metrics: Arc<Metrics>,
) {
    let mut queued: Vec<Box<dyn Job>> = Vec::with_capacity(max_batch);
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(max_batch);
    while rx.recv_many(&mut queued, max_batch).await > 0 {
        metrics.db_batch_size.observe(queued.len() as f64);
        metrics.db_writes_queued.sub(queued.len() as i64);
        combine(&mut queued, &mut batch);
        if connection.as_ref().is_none_or(|c| c.client.is_closed()) {
            connection = match WriterConnection::open(&pg_config).await {
                Ok(c) => Some(c),
                Err(error) => {
                    tracing::error!(%error, "PostgreSQL writer cannot connect");
                    answer_all(&mut batch, &error);
                    continue;
                }
            };
        }
        let Some(conn) = connection.as_mut() else {
            continue;
        };
        let started = Instant::now();
        if let Err(error) = conn.prepare(&batch).await {
            let error = db_error_ref(&error);
            tracing::error!(%error, "preparing writer statements failed");
            answer_all(&mut batch, &error);
            continue;
        }
        commit_batch(conn, &mut batch, &metrics).await;
        metrics
            .db_group_commits
            .observe(started.elapsed().as_secs_f64());
    }
}

/// Moves `queued` into `batch`, each job joining the statement before it when that one takes it
/// (see [`Job::absorb`]).
fn combine(queued: &mut Vec<Box<dyn Job>>, batch: &mut Vec<Box<dyn Job>>) {
    for job in queued.drain(..) {
        let job = match batch.last_mut() {
            Some(last) => match last.absorb(job) {
                Ok(()) => continue,
                Err(job) => job,
            },
            None => job,
        };
        batch.push(job);
    }
}

fn answer_all(batch: &mut Vec<Box<dyn Job>>, error: &StoreError) {
    for job in batch.drain(..) {
        job.answer(Some(error.clone()));
    }
}

/// Commits `batch` as one group and answers every job. A write that fails in the database is
/// taken out and run alone, and the rest of the batch is committed again without it (after a few
/// such rounds, the remaining writes each run alone).
async fn commit_batch(conn: &WriterConnection, batch: &mut Vec<Box<dyn Job>>, metrics: &Metrics) {
    for _ in 0..3 {
        match group_commit(conn, batch).await {
            Ok(()) => {
                for job in batch.drain(..) {
                    job.answer(None);
                }
                return;
            }
            Err(BatchFailed::Transaction(error)) => {
                tracing::error!(%error, writes = batch.len(), "group commit lost its connection");
                answer_all(batch, &error);
                return;
            }
            Err(BatchFailed::At(failed)) if failed < batch.len() => {
                let mut parts = batch.remove(failed).split();
                if parts.len() > 1 {
                    // A statement of several writes failed: the next round runs them apart.
                    batch.splice(failed..failed, parts);
                    continue;
                }
                metrics.db_writes_alone.inc();
                if let Some(job) = parts.pop() {
                    one_by_one(conn, job).await;
                }
                if batch.is_empty() {
                    return;
                }
            }
            Err(BatchFailed::At(_)) => break,
        }
    }
    for job in batch.drain(..).flat_map(|job| job.split()) {
        metrics.db_writes_alone.inc();
        one_by_one(conn, job).await;
    }
}

enum BatchFailed {
    /// Nothing was committed; the write at this index failed first (the ones after it could not
    /// run).
    At(usize),
    /// The transaction itself failed (BEGIN, ROLLBACK or COMMIT; most often a lost connection):
    /// nothing of the batch is known committed.
    Transaction(StoreError),
}

/// BEGIN, every write's statement, then COMMIT: one pipeline, one transaction, one fsync.
async fn group_commit(
    conn: &WriterConnection,
    batch: &mut [Box<dyn Job>],
) -> Result<(), BatchFailed> {
    let rows = {
        let params: Vec<Vec<&(dyn ToSql + Sync)>> = batch.iter().map(|j| j.params()).collect();
        // Polled in order, so the requests go out in order: BEGIN first, then the writes.
        let (begun, rows) = join(
            conn.client.batch_execute("BEGIN"),
            join_all(
                batch
                    .iter()
                    .zip(&params)
                    .map(|(job, p)| conn.client.query(conn.statement(job.as_ref()), p)),
            ),
        )
        .await;
        if let Err(error) = begun {
            return Err(BatchFailed::Transaction(db_error_ref(&error)));
        }
        rows
    };
    let mut failed = None;
    for (index, (job, rows)) in batch.iter_mut().zip(rows).enumerate() {
        let taken = match rows {
            Ok(rows) => job.take(rows),
            Err(error) if is_connection_error(&error) => {
                return Err(BatchFailed::Transaction(db_error_ref(&error)));
            }
            Err(error) => Err(job.error(&error)),
        };
        if let Err(error) = taken {
            tracing::debug!(%error, "write failed in a group commit; running it alone");
            failed = Some(index);
            break;
        }
    }
    if let Some(index) = failed {
        if let Err(error) = conn.client.batch_execute("ROLLBACK").await {
            return Err(BatchFailed::Transaction(db_error_ref(&error)));
        }
        return Err(BatchFailed::At(index));
    }
    conn.client
        .batch_execute("COMMIT")
        .await
        .map_err(|e| BatchFailed::Transaction(db_error_ref(&e)))
}

/// One write in its own transaction, retried a few times on a lock conflict or key race; answers
/// its caller.
async fn one_by_one(conn: &WriterConnection, mut job: Box<dyn Job>) {
    let mut attempt = 0;
    let error = loop {
        attempt += 1;
        if let Err(error) = conn.client.batch_execute("BEGIN").await {
            break Some(db_error_ref(&error));
        }
        let rows = {
            let params = job.params();
            conn.client
                .query(conn.statement(job.as_ref()), &params)
                .await
        };
        match rows {
            Ok(rows) => {
                if let Err(error) = job.take(rows) {
                    let _ = conn.client.batch_execute("ROLLBACK").await;
                    break Some(error);
                }
                match conn.client.batch_execute("COMMIT").await {
                    Ok(()) => break None,
                    Err(error) => break Some(job.error(&error)),
                }
            }
            Err(error) => {
                let _ = conn.client.batch_execute("ROLLBACK").await;
                if attempt < 3 && !is_connection_error(&error) && job.retryable(&error) {
                    continue;
                }
                break Some(job.error(&error));
            }
        }
    };
    job.answer(error);
}
