//! Wallets, inventory and the ledger on PostgreSQL, with group commit.
//!
//! # One statement for many writes
//!
//! A [`LedgerBatch`] holds [`LedgerWrite`]s of distinct accounts and applies them with one SQL
//! statement ([`APPLY`]): it locks the rows they touch (`FOR UPDATE`, in account then key order,
//! as every node does), checks every new balance and count (never below zero, never past
//! `i64::MAX`), and for each write that passes every check, upserts them and inserts its ledger
//! row; a write whose idempotency key was seen before returns the first row instead. A refusal is
//! a result row, not an SQL error, so a refused write leaves the transaction (and its neighbours)
//! healthy and needs no savepoint.
//!
//! Why one statement for many: PostgreSQL spends more of its time starting and ending a
//! statement of this size (planning, executor set-up for a dozen nodes) than on the few rows one
//! write touches; one statement for a whole batch pays that once.
//!
//! # Group commit and order
//!
//! A write is queued as a batch of one on the writer its account picks (`writer.rs`); the writer
//! lets each batch take in the ones queued after it ([`Job::absorb`]) as long as their accounts
//! are not in it yet (and up to [`MAX_WRITES_PER_STATEMENT`]). A second write of an account
//! already in the batch starts the next one, so one account's writes apply in the order they
//! came. If the statement fails (a deadlock with another node, a key race), its writes run again
//! apart, so one bad write fails alone.

use crate::economy::store::EconomyStore;
use crate::store::postgres::writer::key_of;
use crate::store::postgres::PostgresStore;
use async_trait::async_trait;
use std::time::Instant;

use std::any::Any;
use std::collections::HashSet;

use tokio::sync::oneshot;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::economy::store::{
    Changes, InventoryItem, LedgerEntry, LedgerOutcome, LedgerWrite, Receipt, Refusal,
};
use crate::store::postgres::writer::{is_retryable, Job};
use crate::store::postgres::{db_error, db_error_ref, prepared};
use crate::store::StoreError;

/// Applies a [`LedgerBatch`]; see the module documentation. Parameters, one element per write:
/// `$1` its index in the batch, `$2` account, `$3` reason, `$4` metadata, `$5` idempotency key
/// (NULL: none), `$6` now (ms), `$7` changes JSON; one per wallet delta: `$8` write index, `$9`
/// currency, `$10` delta; one per item delta: `$11` write index, `$12` item id, `$13` kind,
/// `$14` delta, `$15` properties (NULL: keep). One row per write, in index order: the new
/// ledger row (id, balances), the earlier row of a reused key (id, changes, reason, balances),
/// the first refusal (what, name, current value, whether it overflowed).
const APPLY: &str = "
WITH writes AS (
    SELECT * FROM unnest($1::int4[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::text[])
        AS t (w, user_id, reason, metadata, idempotency_key, now_ms, changes)
),
wallet_in AS (
    SELECT i.w, x.user_id, i.currency, i.delta
    FROM unnest($8::int4[], $9::text[], $10::int8[]) AS i (w, currency, delta)
    JOIN writes x ON x.w = i.w
),
items_in AS (
    SELECT i.w, x.user_id, i.item_id, i.kind, i.delta, i.properties
    FROM unnest($11::int4[], $12::text[], $13::text[], $14::int8[], $15::text[])
        AS i (w, item_id, kind, delta, properties)
    JOIN writes x ON x.w = i.w
),
prior AS (
    SELECT x.w, l.id, l.changes, l.reason, l.balances
    FROM writes x JOIN ledger l ON l.user_id = x.user_id AND l.idempotency_key = x.idempotency_key
),
fresh AS (
    SELECT x.w FROM writes x WHERE NOT EXISTS (SELECT 1 FROM prior p WHERE p.w = x.w)
),
wallet_now AS (
    SELECT t.user_id, t.currency, t.amount
    FROM wallets t JOIN wallet_in i ON t.user_id = i.user_id AND t.currency = i.currency
    WHERE i.w IN (SELECT f.w FROM fresh f)
    ORDER BY t.user_id, t.currency
    FOR UPDATE OF t
),
items_now AS (
    SELECT t.user_id, t.item_id, t.count
    FROM inventory t JOIN items_in i ON t.user_id = i.user_id AND t.item_id = i.item_id
    WHERE i.w IN (SELECT f.w FROM fresh f)
    ORDER BY t.user_id, t.item_id
    FOR UPDATE OF t
),
wallet_next AS (
    SELECT i.w, i.user_id, i.currency, n.amount IS NOT NULL AS existed,
           COALESCE(n.amount, 0) AS current, COALESCE(n.amount, 0)::numeric + i.delta AS next
    FROM wallet_in i LEFT JOIN wallet_now n ON n.user_id = i.user_id AND n.currency = i.currency
    WHERE i.w IN (SELECT f.w FROM fresh f)
),
items_next AS (
    SELECT i.w, i.user_id, i.item_id, i.kind, i.properties, n.count IS NOT NULL AS existed,
           COALESCE(n.count, 0) AS current, COALESCE(n.count, 0)::numeric + i.delta AS next
    FROM items_in i LEFT JOIN items_now n ON n.user_id = i.user_id AND n.item_id = i.item_id
    WHERE i.w IN (SELECT f.w FROM fresh f)
),
refusal AS (
    SELECT DISTINCT ON (checked.w) checked.w, what, name, current, next FROM (
        SELECT w, 0 AS rank, 'wallet' AS what, currency AS name, current, next FROM wallet_next
        UNION ALL
        SELECT w, 1, 'items', item_id, current, next FROM items_next
    ) AS checked
    WHERE next < 0 OR next > 9223372036854775807
    ORDER BY checked.w, rank, name
),
ok AS (
    SELECT f.w FROM fresh f WHERE NOT EXISTS (SELECT 1 FROM refusal r WHERE r.w = f.w)
),
-- Rows that were there are locked above: they take their checked new value. Rows that were not
-- are inserted; one another node inserted meanwhile (there was nothing to lock) gets this
-- change added, and the CHECK constraint refuses a negative result: the statement then fails,
-- and the write runs again alone, sees the row and is checked against it.
wallet_set AS (
    UPDATE wallets t SET amount = n.next::int8
    FROM wallet_next n
    WHERE n.existed AND n.w IN (SELECT w FROM ok)
      AND t.user_id = n.user_id AND t.currency = n.currency
    RETURNING t.user_id, t.currency, t.amount
),
wallet_new AS (
    INSERT INTO wallets AS t (user_id, currency, amount)
    SELECT n.user_id, n.currency, n.next::int8
    FROM wallet_next n WHERE NOT n.existed AND n.w IN (SELECT w FROM ok)
    ORDER BY n.user_id, n.currency
    ON CONFLICT (user_id, currency) DO UPDATE SET amount = t.amount + EXCLUDED.amount
    RETURNING user_id, currency, amount
),
items_set AS (
    UPDATE inventory t SET count = n.next::int8, properties = COALESCE(n.properties, t.properties),
                           update_time_ms = x.now_ms
    FROM items_next n JOIN writes x ON x.w = n.w
    WHERE n.existed AND n.w IN (SELECT w FROM ok)
      AND t.user_id = n.user_id AND t.item_id = n.item_id
    RETURNING t.user_id, t.item_id, t.count
),
items_new AS (
    INSERT INTO inventory AS v (user_id, item_id, kind, count, properties, update_time_ms)
    SELECT n.user_id, n.item_id, n.kind, n.next::int8, COALESCE(n.properties, '{}'), x.now_ms
    FROM items_next n JOIN writes x ON x.w = n.w
    WHERE NOT n.existed AND n.w IN (SELECT w FROM ok)
    ORDER BY n.user_id, n.item_id
    ON CONFLICT (user_id, item_id) DO UPDATE SET
        count = v.count + EXCLUDED.count,
        properties = CASE WHEN EXCLUDED.properties = '{}' THEN v.properties ELSE EXCLUDED.properties END,
        update_time_ms = EXCLUDED.update_time_ms
    RETURNING user_id, item_id, count
),
wallet_after AS (
    SELECT * FROM wallet_set UNION ALL SELECT * FROM wallet_new
),
items_after AS (
    SELECT * FROM items_set UNION ALL SELECT * FROM items_new
),
wallet_json AS (
    SELECT user_id, json_object_agg(currency, amount ORDER BY currency) AS balances
    FROM wallet_after GROUP BY user_id
),
items_json AS (
    SELECT user_id, json_object_agg(item_id, count ORDER BY item_id) AS balances
    FROM items_after GROUP BY user_id
),
entry AS (
    INSERT INTO ledger (user_id, changes, balances, reason, metadata, idempotency_key, create_time_ms)
    SELECT x.user_id, x.changes,
           json_build_object('wallet', COALESCE(wj.balances, '{}'::json),
                             'items', COALESCE(ij.balances, '{}'::json))::text,
           x.reason, x.metadata, x.idempotency_key, x.now_ms
    FROM writes x
    LEFT JOIN wallet_json wj ON wj.user_id = x.user_id
    LEFT JOIN items_json ij ON ij.user_id = x.user_id
    WHERE x.w IN (SELECT w FROM ok)
    ORDER BY x.w
    RETURNING id, user_id, balances
)
SELECT e.id, e.balances, p.id, p.changes, p.reason, p.balances,
       r.what, r.name, r.current, r.next > 0
FROM writes x
LEFT JOIN entry e ON e.user_id = x.user_id
LEFT JOIN prior p ON p.w = x.w
LEFT JOIN refusal r ON r.w = x.w
ORDER BY x.w";

const APPLY_TYPES: &[Type] = &[
    Type::INT4_ARRAY,
    Type::UUID_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT4_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::INT4_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::TEXT_ARRAY,
];

/// Most writes one [`APPLY`] applies. Its plan is made once, for arrays of any length, and some of
/// its joins grow with the square of their length; past a few dozen writes, executor set-up is
/// already a small part of the cost, so a larger batch runs as several statements.
const MAX_WRITES_PER_STATEMENT: usize = 32;

/// [`APPLY`]'s parameters, a column each.
#[derive(Default)]
struct Columns {
    index: Vec<i32>,
    users: Vec<Uuid>,
    reasons: Vec<String>,
    metadata: Vec<String>,
    keys: Vec<Option<String>>,
    now: Vec<i64>,
    changes: Vec<String>,
    wallet_index: Vec<i32>,
    currencies: Vec<String>,
    deltas: Vec<i64>,
    item_index: Vec<i32>,
    item_ids: Vec<String>,
    kinds: Vec<String>,
    item_deltas: Vec<i64>,
    properties: Vec<Option<String>>,
}

impl Columns {
    fn push(&mut self, write: &LedgerWrite) {
        let index = self.index.len() as i32;
        self.index.push(index);
        self.users.push(write.user_id);
        self.reasons.push(write.reason.clone());
        self.metadata.push(write.metadata.clone());
        self.keys.push(write.idempotency_key.clone());
        self.now.push(write.now_ms);
        self.changes.push(write.changes.clone());
        for (currency, delta) in &write.wallet {
            self.wallet_index.push(index);
            self.currencies.push(currency.clone());
            self.deltas.push(*delta);
        }
        for item in &write.items {
            self.item_index.push(index);
            self.item_ids.push(item.item_id.clone());
            self.kinds.push(item.kind.clone());
            self.item_deltas.push(item.delta);
            self.properties.push(item.properties.clone());
        }
    }
}

/// One queued ledger write and whom to answer.
struct Queued {
    write: LedgerWrite,
    answer: oneshot::Sender<Result<LedgerOutcome, StoreError>>,
    outcome: Option<LedgerOutcome>,
}

/// Ledger writes of distinct accounts, applied by one [`APPLY`]; see the module documentation.
pub(crate) struct LedgerBatch {
    writes: Vec<Queued>,
    accounts: HashSet<Uuid>,
    columns: Columns,
}

impl LedgerBatch {
    /// A batch of the one write, and where its outcome will come.
    pub fn single(
        write: LedgerWrite,
    ) -> (
        Box<LedgerBatch>,
        oneshot::Receiver<Result<LedgerOutcome, StoreError>>,
    ) {
        let (answer, answered) = oneshot::channel();
        let batch = LedgerBatch::of(Queued {
            write,
            answer,
            outcome: None,
        });
        (batch, answered)
    }

    /// A batch of one queued write.
    fn of(queued: Queued) -> Box<LedgerBatch> {
        let mut batch = Box::new(LedgerBatch {
            writes: Vec::with_capacity(1),
            accounts: HashSet::new(),
            columns: Columns::default(),
        });
        batch.push(queued);
        batch
    }

    fn push(&mut self, queued: Queued) {
        self.accounts.insert(queued.write.user_id);
        self.columns.push(&queued.write);
        self.writes.push(queued);
    }
}

impl Job for LedgerBatch {
    fn sql(&self) -> (&'static str, &'static [Type]) {
        (APPLY, APPLY_TYPES)
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let c = &self.columns;
        vec![
            &c.index,
            &c.users,
            &c.reasons,
            &c.metadata,
            &c.keys,
            &c.now,
            &c.changes,
            &c.wallet_index,
            &c.currencies,
            &c.deltas,
            &c.item_index,
            &c.item_ids,
            &c.kinds,
            &c.item_deltas,
            &c.properties,
        ]
    }

    fn take(&mut self, rows: Vec<Row>) -> Result<(), StoreError> {
        if rows.len() != self.writes.len() {
            return Err(StoreError::Database(format!(
                "ledger batch of {} writes returned {} rows",
                self.writes.len(),
                rows.len()
            )));
        }
        for (queued, row) in self.writes.iter_mut().zip(&rows) {
            queued.outcome = Some(outcome(&queued.write, row)?);
        }
        Ok(())
    }

    fn error(&self, error: &tokio_postgres::Error) -> StoreError {
        db_error_ref(error)
    }

    fn retryable(&self, error: &tokio_postgres::Error) -> bool {
        is_retryable(error)
    }

    fn answer(self: Box<Self>, error: Option<StoreError>) {
        for queued in self.writes {
            let result = match (&error, queued.outcome) {
                (Some(error), _) => Err(error.clone()),
                (None, Some(outcome)) => Ok(outcome),
                (None, None) => Err(StoreError::Database("ledger write was not run".into())),
            };
            let _ = queued.answer.send(result);
        }
    }

    fn absorb(&mut self, next: Box<dyn Job>) -> Result<(), Box<dyn Job>> {
        let joins = self.writes.len() < MAX_WRITES_PER_STATEMENT
            && next
                .as_any()
                .downcast_ref::<LedgerBatch>()
                .is_some_and(|other| other.accounts.is_disjoint(&self.accounts));
        if !joins {
            return Err(next);
        }
        let Ok(other) = next.into_any().downcast::<LedgerBatch>() else {
            unreachable!("checked above");
        };
        for queued in other.writes {
            self.push(queued);
        }
        Ok(())
    }

    fn split(self: Box<Self>) -> Vec<Box<dyn Job>> {
        if self.writes.len() == 1 {
            return vec![self];
        }
        self.writes
            .into_iter()
            .map(|queued| {
                LedgerBatch::of(Queued {
                    outcome: None,
                    ..queued
                }) as Box<dyn Job>
            })
            .collect()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Reads one write's row of [`APPLY`].
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

pub async fn wallet(
    client: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
) -> Result<Vec<(String, i64)>, StoreError> {
    let rows = client
        .query(
            &prepared(
                client,
                "SELECT currency, amount FROM wallets WHERE user_id = $1 ORDER BY currency",
            )
            .await?,
            &[&user_id],
        )
        .await
        .map_err(db_error)?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

pub async fn inventory(
    client: &impl deadpool_postgres::GenericClient,
    user_id: Uuid,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<InventoryItem>, StoreError> {
    // `COLLATE "C"`: byte order, the order SQLite sorts and pages in, whatever the
    // database's collation.
    let rows = client
        .query(
            &prepared(
                client,
                "SELECT item_id, kind, count, properties, update_time_ms FROM inventory
             WHERE user_id = $1 AND count > 0 AND item_id COLLATE \"C\" > $2
             ORDER BY item_id COLLATE \"C\" LIMIT $3",
            )
            .await?,
            &[
                &user_id,
                &after.unwrap_or(""),
                &i64::try_from(limit).unwrap_or(i64::MAX),
            ],
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
            &prepared(
                client,
                "SELECT id, changes, balances, reason, metadata, idempotency_key, create_time_ms
             FROM ledger WHERE user_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3",
            )
            .await?,
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
        let result = wallet(&client, user_id).await;
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
        let result = inventory(&client, user_id, after.as_deref(), limit).await;
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
        let result = ledger(&client, user_id, before, limit).await;
        self.metrics.observe_db("ledger", started.elapsed());
        result
    }

    async fn set_ledger_metadata(
        &self,
        id: i64,
        metadata: String,
    ) -> Result<Option<(Uuid, LedgerEntry)>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "UPDATE ledger SET metadata = $2 WHERE id = $1
             RETURNING id, changes, balances, reason, metadata, idempotency_key, create_time_ms,
                       user_id",
        )
        .await?;
        let row = client
            .query_opt(&statement, &[&id, &metadata])
            .await
            .map_err(db_error)?;
        let Some(r) = row else {
            return Ok(None);
        };
        Ok(Some((
            r.get(7),
            LedgerEntry {
                id: r.get(0),
                changes: Changes::from_json(r.get(1))?,
                balances: Changes::from_json(r.get(2))?,
                reason: r.get(3),
                metadata: r.get(4),
                idempotency_key: r.get(5),
                create_time_ms: r.get(6),
            },
        )))
    }
}
