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
//! [`ApplyLedger`] is a [`Write`]: the writers (`writer.rs`) commit it in batches with the other
//! write paths, keyed by account so one account's writes keep their order.

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use super::db_error;
use super::writer::Write;
use crate::store::ledger::{
    Changes, InventoryItem, LedgerEntry, LedgerOutcome, LedgerWrite, Receipt, Refusal,
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

/// One ledger write with [`APPLY`]'s column parameters, taken from it.
pub(super) struct ApplyLedger {
    currencies: Vec<String>,
    deltas: Vec<i64>,
    item_ids: Vec<String>,
    kinds: Vec<String>,
    item_deltas: Vec<i64>,
    properties: Vec<Option<String>>,
    write: LedgerWrite,
}

impl ApplyLedger {
    pub fn new(mut write: LedgerWrite) -> Self {
        let (currencies, deltas) = std::mem::take(&mut write.wallet).into_iter().unzip();
        let items = std::mem::take(&mut write.items);
        let mut this = ApplyLedger {
            currencies,
            deltas,
            item_ids: Vec::with_capacity(items.len()),
            kinds: Vec::with_capacity(items.len()),
            item_deltas: Vec::with_capacity(items.len()),
            properties: Vec::with_capacity(items.len()),
            write,
        };
        for item in items {
            this.item_ids.push(item.item_id);
            this.kinds.push(item.kind);
            this.item_deltas.push(item.delta);
            this.properties.push(item.properties);
        }
        this
    }
}

impl Write for ApplyLedger {
    type Output = LedgerOutcome;
    const PATH: &'static str = "apply_ledger";
    const SQL: &'static str = APPLY;
    const TYPES: &'static [Type] = APPLY_TYPES;

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.write.user_id,
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

    fn outcome(&self, rows: Vec<Row>) -> Result<LedgerOutcome, StoreError> {
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Database("ledger write returned no row".into()))?;
        outcome(&self.write, row)
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
