//! Wallets, inventory and the ledger on PostgreSQL, with a group-commit writer.
//!
//! # One statement per write
//!
//! A [`LedgerWrite`] is one SQL statement ([`APPLY`]): it locks the rows it touches
//! (`FOR UPDATE`), checks every new balance and count (never below zero, never past
//! `i64::MAX`), and only if all pass, upserts them and inserts the ledger row; an idempotency key
//! seen before returns the first row instead. A refusal is a result row, not an SQL error, so a
//! refused write leaves its transaction healthy and needs no savepoint.
//!
//! # Group commit
//!
//! [`Writer`] owns one dedicated connection. It takes every write waiting in its queue (up to
//! `database.max_batch`), sends `BEGIN`, every write's statement and nothing else in one pipeline
//! (one network round trip for the whole batch, the statements running back to back in one
//! transaction), then `COMMIT`: one fsync for the batch. Only after the commit does it answer the
//! callers, so every answered write is durable.
//!
//! Why not a savepoint per write: a refusal does not raise an error here, so savepoints would only
//! guard against unexpected errors (a lost connection, a deadlock with another node), and each
//! savepoint that writes is a subtransaction: past 64 of them in one transaction PostgreSQL's
//! subtransaction cache overflows and every other session's snapshots get slower. Instead, when
//! a statement of a batch fails, the batch is rolled back, the failing write runs alone in its
//! own transaction, and the rest is committed again without it: one bad write cannot fail the
//! others.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::{join, join_all};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls, Row, Statement};
use uuid::Uuid;

use super::{db_error, db_error_ref};
use crate::base::metrics::Metrics;
use crate::store::ledger::{
    Changes, InventoryItem, LedgerEntry, LedgerOutcome, LedgerWrite, Receipt, Refusal,
    StartingGrant, STARTING_GRANT_REASON,
};
use crate::store::StoreError;

/// Applies one [`LedgerWrite`]; see the module documentation. Parameters: `$1` user, `$2`/`$3`
/// currencies and deltas, `$4`..`$7` item ids, kinds, deltas and properties (NULL: keep),
/// `$8` reason, `$9` metadata, `$10` idempotency key, `$11` now (ms), `$12` changes JSON.
const APPLY: &str = "
WITH prior AS (
    SELECT id, changes, reason, balances FROM ledger
    WHERE $10::text IS NOT NULL AND user_id = $1 AND idempotency_key = $10
),
wallet_in AS (
    SELECT currency, delta FROM unnest($2::text[], $3::int8[]) AS t (currency, delta)
),
items_in AS (
    SELECT item_id, kind, delta, properties
    FROM unnest($4::text[], $5::text[], $6::int8[], $7::text[]) AS t (item_id, kind, delta, properties)
),
wallet_now AS (
    SELECT currency, amount FROM wallets
    WHERE user_id = $1 AND currency = ANY ($2::text[]) AND NOT EXISTS (SELECT 1 FROM prior)
    ORDER BY currency
    FOR UPDATE
),
items_now AS (
    SELECT item_id, count FROM inventory
    WHERE user_id = $1 AND item_id = ANY ($4::text[]) AND NOT EXISTS (SELECT 1 FROM prior)
    ORDER BY item_id
    FOR UPDATE
),
wallet_next AS (
    SELECT i.currency, i.delta, COALESCE(n.amount, 0) AS current,
           COALESCE(n.amount, 0)::numeric + i.delta AS next
    FROM wallet_in i LEFT JOIN wallet_now n USING (currency)
),
items_next AS (
    SELECT i.item_id, i.kind, i.delta, i.properties, COALESCE(n.count, 0) AS current,
           COALESCE(n.count, 0)::numeric + i.delta AS next
    FROM items_in i LEFT JOIN items_now n USING (item_id)
),
refusal AS (
    SELECT what, name, current, next FROM (
        SELECT 0 AS rank, 'wallet' AS what, currency AS name, current, next FROM wallet_next
        UNION ALL
        SELECT 1, 'items', item_id, current, next FROM items_next
    ) AS checked
    WHERE next < 0 OR next > 9223372036854775807
    ORDER BY rank, name
    LIMIT 1
),
verdict AS (
    SELECT NOT EXISTS (SELECT 1 FROM prior) AND NOT EXISTS (SELECT 1 FROM refusal) AS ok
),
-- The row proposed for insertion holds the new balance (never negative, or the CHECK constraint
-- would refuse it before ON CONFLICT is considered); an existing row, locked above, gets the delta.
wallet_after AS (
    INSERT INTO wallets AS w (user_id, currency, amount)
    SELECT $1, currency, GREATEST(LEAST(next, 9223372036854775807), 0)::int8 FROM wallet_next
    WHERE (SELECT ok FROM verdict)
    ON CONFLICT (user_id, currency) DO UPDATE
        SET amount = w.amount + (SELECT i.delta FROM wallet_in i WHERE i.currency = EXCLUDED.currency)
    RETURNING currency, amount
),
items_after AS (
    INSERT INTO inventory AS v (user_id, item_id, kind, count, properties, update_time_ms)
    SELECT $1, item_id, kind, GREATEST(LEAST(next, 9223372036854775807), 0)::int8,
           COALESCE(properties, '{}'), $11
    FROM items_next WHERE (SELECT ok FROM verdict)
    ON CONFLICT (user_id, item_id) DO UPDATE SET
        count = v.count + (SELECT i.delta FROM items_in i WHERE i.item_id = EXCLUDED.item_id),
        properties = COALESCE(
            (SELECT i.properties FROM items_in i WHERE i.item_id = EXCLUDED.item_id),
            v.properties),
        update_time_ms = EXCLUDED.update_time_ms
    RETURNING item_id, count
),
entry AS (
    INSERT INTO ledger (user_id, changes, balances, reason, metadata, idempotency_key, create_time_ms)
    SELECT $1, $12, json_build_object(
            'wallet', COALESCE((SELECT json_object_agg(currency, amount ORDER BY currency) FROM wallet_after), '{}'::json),
            'items', COALESCE((SELECT json_object_agg(item_id, count ORDER BY item_id) FROM items_after), '{}'::json)
        )::text, $8, $9, $10, $11
    WHERE (SELECT ok FROM verdict)
    RETURNING id, balances
)
SELECT (SELECT id FROM entry), (SELECT balances FROM entry),
       (SELECT id FROM prior), (SELECT changes FROM prior), (SELECT reason FROM prior),
       (SELECT balances FROM prior),
       (SELECT what FROM refusal), (SELECT name FROM refusal), (SELECT current FROM refusal),
       (SELECT next > 0 FROM refusal)";

const APPLY_TYPES: &[Type] = &[
    Type::UUID,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::INT8,
    Type::TEXT,
];

/// The parameters of [`APPLY`] for one write, borrowed from it.
struct ApplyParams<'a> {
    user_id: Uuid,
    currencies: Vec<&'a str>,
    deltas: Vec<i64>,
    item_ids: Vec<&'a str>,
    kinds: Vec<&'a str>,
    item_deltas: Vec<i64>,
    properties: Vec<Option<&'a str>>,
    write: &'a LedgerWrite,
}

impl<'a> ApplyParams<'a> {
    fn new(write: &'a LedgerWrite) -> Self {
        ApplyParams {
            user_id: write.user_id,
            currencies: write.wallet.iter().map(|(c, _)| c.as_str()).collect(),
            deltas: write.wallet.iter().map(|(_, d)| *d).collect(),
            item_ids: write.items.iter().map(|i| i.item_id.as_str()).collect(),
            kinds: write.items.iter().map(|i| i.kind.as_str()).collect(),
            item_deltas: write.items.iter().map(|i| i.delta).collect(),
            properties: write
                .items
                .iter()
                .map(|i| i.properties.as_deref())
                .collect(),
            write,
        }
    }

    fn refs(&self) -> [&(dyn ToSql + Sync); 12] {
        [
            &self.user_id,
            &self.currencies,
            &self.deltas,
            &self.item_ids,
            &self.kinds,
            &self.item_deltas,
            &self.properties,
            &self.write.reason,
            &self.write.metadata,
            &self.write.idempotency_key,
            &self.write.now_ms,
            &self.write.changes,
        ]
    }
}

/// Reads [`APPLY`]'s one result row.
fn outcome(write: &LedgerWrite, row: &Row) -> Result<LedgerOutcome, StoreError> {
    let text = |i: usize| row.try_get::<_, Option<String>>(i).map_err(db_error);
    let id = |i: usize| row.try_get::<_, Option<i64>>(i).map_err(db_error);
    if let Some(prior_id) = id(2)? {
        let same = text(3)?.as_deref() == Some(write.changes.as_str())
            && text(4)?.as_deref() == Some(write.reason.as_str());
        if !same {
            return Ok(LedgerOutcome::Refused(Refusal::KeyReused));
        }
        return Ok(LedgerOutcome::Replayed(Receipt {
            ledger_id: prior_id,
            balances: Changes::from_json(&text(5)?.unwrap_or_default())?,
        }));
    }
    if let Some(what) = text(6)? {
        let name = text(7)?.unwrap_or_default();
        let current = id(8)?.unwrap_or(0);
        let overflow = row
            .try_get::<_, Option<bool>>(9)
            .map_err(db_error)?
            .unwrap_or(false);
        let refusal = match (what.as_str(), overflow) {
            ("wallet", false) => Refusal::InsufficientFunds {
                currency: name,
                balance: current,
            },
            ("wallet", true) => Refusal::BalanceOverflow { currency: name },
            (_, false) => Refusal::InsufficientItems {
                item_id: name,
                count: current,
            },
            (_, true) => Refusal::CountOverflow { item_id: name },
        };
        return Ok(LedgerOutcome::Refused(refusal));
    }
    match id(0)? {
        Some(ledger_id) => Ok(LedgerOutcome::Applied(Receipt {
            ledger_id,
            balances: Changes::from_json(&text(1)?.unwrap_or_default())?,
        })),
        None => Err(StoreError::Database(
            "ledger write produced no outcome".into(),
        )),
    }
}

/// Whether running the write again may succeed: lock conflicts with another node, or losing a
/// race to insert the same idempotency key (the retry then finds it).
fn is_retryable(error: &tokio_postgres::Error) -> bool {
    error.code().is_some_and(|code| {
        code == &SqlState::T_R_DEADLOCK_DETECTED
            || code == &SqlState::T_R_SERIALIZATION_FAILURE
            || code == &SqlState::UNIQUE_VIOLATION
    })
}

/// Gives a new account its starting wallet and inventory with its ledger row, in the caller's
/// transaction (the one inserting the account).
pub async fn grant(
    tx: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
    grant: &StartingGrant,
    now_ms: i64,
) -> Result<(), StoreError> {
    let currencies: Vec<&str> = grant.wallet.iter().map(|(c, _)| c.as_str()).collect();
    let amounts: Vec<i64> = grant.wallet.iter().map(|(_, a)| *a).collect();
    let item_ids: Vec<&str> = grant.items.iter().map(|i| i.item_id.as_str()).collect();
    let kinds: Vec<&str> = grant.items.iter().map(|i| i.kind.as_str()).collect();
    let counts: Vec<i64> = grant.items.iter().map(|i| i.delta).collect();
    tx.execute(
        "WITH w AS (
            INSERT INTO wallets (user_id, currency, amount)
            SELECT $1, c, a FROM unnest($2::text[], $3::int8[]) AS t (c, a)
         ),
         i AS (
            INSERT INTO inventory (user_id, item_id, kind, count, properties, update_time_ms)
            SELECT $1, i, k, n, '{}', $7 FROM unnest($4::text[], $5::text[], $6::int8[]) AS t (i, k, n)
         )
         INSERT INTO ledger (user_id, changes, balances, reason, metadata, create_time_ms)
         VALUES ($1, $8, $8, $9, '{}', $7)",
        &[
            &user_id,
            &currencies,
            &amounts,
            &item_ids,
            &kinds,
            &counts,
            &now_ms,
            &grant.changes,
            &STARTING_GRANT_REASON,
        ],
    )
    .await
    .map_err(db_error)?;
    Ok(())
}

pub async fn wallet(
    client: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
) -> Result<Vec<(String, i64)>, StoreError> {
    let rows = client
        .query(
            "SELECT currency, amount FROM wallets WHERE user_id = $1 ORDER BY currency",
            &[&user_id],
        )
        .await
        .map_err(db_error)?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

pub async fn inventory(
    client: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
) -> Result<Vec<InventoryItem>, StoreError> {
    let rows = client
        .query(
            "SELECT item_id, kind, count, properties, update_time_ms FROM inventory
             WHERE user_id = $1 AND count > 0 ORDER BY item_id",
            &[&user_id],
        )
        .await
        .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| InventoryItem {
            item_id: r.get(0),
            kind: r.get(1),
            count: r.get(2),
            properties: r.get(3),
            update_time_ms: r.get(4),
        })
        .collect())
}

pub async fn ledger(
    client: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
    before: Option<i64>,
    limit: usize,
) -> Result<Vec<LedgerEntry>, StoreError> {
    let rows = client
        .query(
            "SELECT id, changes, balances, reason, metadata, idempotency_key, create_time_ms
             FROM ledger WHERE user_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3",
            &[
                &user_id,
                &before.unwrap_or(i64::MAX),
                &i64::try_from(limit).unwrap_or(i64::MAX),
            ],
        )
        .await
        .map_err(db_error)?;
    rows.iter()
        .map(|r| {
            Ok(LedgerEntry {
                id: r.get(0),
                changes: Changes::from_json(r.get(1))?,
                balances: Changes::from_json(r.get(2))?,
                reason: r.get(3),
                metadata: r.get(4),
                idempotency_key: r.get(5),
                create_time_ms: r.get(6),
            })
        })
        .collect()
}

/// One write waiting for the writer, with where to send its outcome.
struct Job {
    write: LedgerWrite,
    answer: oneshot::Sender<Result<LedgerOutcome, StoreError>>,
}

/// The group-commit writer for ledger writes: a queue and the task that drains it.
pub struct Writer {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    metrics: Arc<Metrics>,
}

impl Writer {
    /// Connects and starts the writer task.
    pub async fn start(
        pg_config: tokio_postgres::Config,
        max_batch: usize,
        queue: usize,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Writer> {
        let connection = WriterConnection::open(&pg_config).await?;
        let (jobs, rx) = mpsc::channel(queue);
        let task = tokio::spawn(write_loop(
            pg_config,
            Some(connection),
            rx,
            max_batch,
            metrics.clone(),
        ));
        Ok(Writer {
            jobs: Mutex::new(Some(jobs)),
            task: Mutex::new(Some(task)),
            metrics,
        })
    }

    /// Queues `write` for the next group commit and answers once that commit is durable.
    pub async fn apply(&self, write: LedgerWrite) -> Result<LedgerOutcome, StoreError> {
        let started = Instant::now();
        let jobs = self.jobs.lock().clone().ok_or(StoreError::Closed)?;
        let (answer, answered) = oneshot::channel();
        self.metrics.db_writes_queued.inc();
        if jobs.send(Job { write, answer }).await.is_err() {
            self.metrics.db_writes_queued.dec();
            return Err(StoreError::Closed);
        }
        let result = answered.await.map_err(|_| StoreError::Closed)?;
        self.metrics.observe_db("apply_ledger", started.elapsed());
        result
    }

    /// Stops taking writes, finishes the queued ones and waits for the task to end.
    pub async fn close(&self) {
        self.jobs.lock().take();
        let task = self.task.lock().take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

/// The writer's own connection and its prepared statement.
struct WriterConnection {
    client: Client,
    apply: Statement,
}

impl WriterConnection {
    async fn open(pg_config: &tokio_postgres::Config) -> Result<WriterConnection, StoreError> {
        let (client, connection) = pg_config.connect(NoTls).await.map_err(db_error)?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::warn!(%error, "PostgreSQL writer connection ended");
            }
        });
        let apply = client
            .prepare_typed(APPLY, APPLY_TYPES)
            .await
            .map_err(db_error)?;
        Ok(WriterConnection { client, apply })
    }
}

async fn write_loop(
    pg_config: tokio_postgres::Config,
    mut connection: Option<WriterConnection>,
    mut rx: mpsc::Receiver<Job>,
    max_batch: usize,
    metrics: Arc<Metrics>,
) {
    let mut batch: Vec<Job> = Vec::with_capacity(max_batch);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        metrics.db_batch_size.observe(batch.len() as f64);
        metrics.db_writes_queued.sub(batch.len() as i64);
        if connection.as_ref().is_none_or(|c| c.client.is_closed()) {
            connection = match WriterConnection::open(&pg_config).await {
                Ok(c) => Some(c),
                Err(error) => {
                    tracing::error!(%error, "PostgreSQL writer cannot connect");
                    for job in batch.drain(..) {
                        let _ = job.answer.send(Err(error.clone()));
                    }
                    continue;
                }
            };
        }
        let Some(conn) = connection.as_ref() else {
            continue;
        };
        commit_batch(conn, &mut batch).await;
    }
}

/// Commits `batch` as one group and answers every job. A write that fails in the database is
/// taken out and run alone, and the rest of the batch is committed again without it (after a few
/// such rounds, the remaining writes each run alone).
async fn commit_batch(conn: &WriterConnection, batch: &mut Vec<Job>) {
    for _ in 0..3 {
        match group_commit(conn, batch).await {
            Ok(outcomes) => {
                for (job, outcome) in batch.drain(..).zip(outcomes) {
                    let _ = job.answer.send(Ok(outcome));
                }
                return;
            }
            Err(BatchFailed::CommitUnknown(error)) => {
                // The connection broke during COMMIT: the batch may or may not be durable.
                tracing::error!(%error, "group commit outcome unknown");
                for job in batch.drain(..) {
                    let _ = job.answer.send(Err(error.clone()));
                }
                return;
            }
            Err(BatchFailed::Retry(Some(failed))) if failed < batch.len() => {
                let job = batch.remove(failed);
                let result = one_by_one(conn, &job.write).await;
                let _ = job.answer.send(result);
                if batch.is_empty() {
                    return;
                }
            }
            Err(BatchFailed::Retry(_)) => break,
        }
    }
    for job in batch.drain(..) {
        let result = one_by_one(conn, &job.write).await;
        let _ = job.answer.send(result);
    }
}

enum BatchFailed {
    /// Nothing was committed: the write at this index failed first (the ones after it could not
    /// run), or, with `None`, the transaction could not be used at all.
    Retry(Option<usize>),
    /// COMMIT did not answer: the batch's fate is unknown.
    CommitUnknown(StoreError),
}

/// BEGIN, every write's statement, then COMMIT: one pipeline, one transaction, one fsync.
async fn group_commit(
    conn: &WriterConnection,
    batch: &[Job],
) -> Result<Vec<LedgerOutcome>, BatchFailed> {
    let params: Vec<ApplyParams> = batch.iter().map(|j| ApplyParams::new(&j.write)).collect();
    let refs: Vec<[&(dyn ToSql + Sync); 12]> = params.iter().map(ApplyParams::refs).collect();
    // Polled in order, so the requests go out in order: BEGIN first, then the writes.
    let (begun, rows) = join(
        conn.client.batch_execute("BEGIN"),
        join_all(refs.iter().map(|r| conn.client.query_one(&conn.apply, r))),
    )
    .await;
    let mut outcomes = Vec::with_capacity(batch.len());
    let mut failed = begun.is_err().then_some(None);
    for (index, (job, row)) in batch.iter().zip(&rows).enumerate() {
        let result = match row {
            Ok(row) => outcome(&job.write, row),
            Err(error) => Err(db_error_ref(error)),
        };
        match result {
            Ok(o) => outcomes.push(o),
            Err(error) => {
                tracing::debug!(%error, "write failed in a group commit; running it alone");
                failed = Some(Some(index));
                break;
            }
        }
    }
    if let Some(first) = failed {
        let _ = conn.client.batch_execute("ROLLBACK").await;
        return Err(BatchFailed::Retry(first));
    }
    conn.client
        .batch_execute("COMMIT")
        .await
        .map_err(|e| BatchFailed::CommitUnknown(db_error(e)))?;
    Ok(outcomes)
}

/// One write in its own transaction, retried a few times on a lock conflict or key race.
async fn one_by_one(
    conn: &WriterConnection,
    write: &LedgerWrite,
) -> Result<LedgerOutcome, StoreError> {
    let params = ApplyParams::new(write);
    let refs = params.refs();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = async {
            conn.client.batch_execute("BEGIN").await?;
            let row = conn.client.query_one(&conn.apply, &refs).await;
            match row {
                Ok(row) => {
                    conn.client.batch_execute("COMMIT").await?;
                    Ok(row)
                }
                Err(error) => {
                    let _ = conn.client.batch_execute("ROLLBACK").await;
                    Err(error)
                }
            }
        }
        .await;
        match result {
            Ok(row) => return outcome(write, &row),
            Err(error) if attempt < 3 && is_retryable(&error) => continue,
            Err(error) => return Err(db_error(error)),
        }
    }
}
