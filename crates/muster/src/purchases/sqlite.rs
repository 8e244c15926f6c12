//! Purchases and subscriptions on SQLite: each upsert is one `INSERT … ON CONFLICT DO UPDATE …
//! RETURNING` per row, the rows of one validation in one job of the writer (one transaction);
//! listings read the `(user_id, purchase_time_ms, id)` indexes.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Row};
use uuid::Uuid;

use crate::purchases::store::{
    Page, PurchaseRecord, PurchaseStore, StoredPurchase, SubscriptionRecord,
};
use crate::store::sqlite::{db_error, parse_uuid, SqliteStore};
use crate::store::StoreError;

const PURCHASE_COLUMNS: &str = "transaction_id, user_id, store, product_id, purchase_time_ms,
    refund_time_ms, environment, raw_response, create_time_ms, update_time_ms";

const SUBSCRIPTION_COLUMNS: &str = "original_transaction_id, user_id, store, product_id,
    purchase_time_ms, expire_time_ms, refund_time_ms, environment, raw_response, raw_notification,
    create_time_ms, update_time_ms";

/// A row of [`PURCHASE_COLUMNS`], its user still text.
type PurchaseRow = (PurchaseRecord, Option<String>);

fn purchase_row(r: &Row<'_>) -> rusqlite::Result<PurchaseRow> {
    Ok((
        PurchaseRecord {
            transaction_id: r.get(0)?,
            user_id: None,
            store: r.get(2)?,
            product_id: r.get(3)?,
            purchase_time_ms: r.get(4)?,
            refund_time_ms: r.get(5)?,
            environment: r.get(6)?,
            raw_response: r.get(7)?,
            create_time_ms: r.get(8)?,
            update_time_ms: r.get(9)?,
        },
        r.get(1)?,
    ))
}

fn with_user(row: PurchaseRow) -> Result<PurchaseRecord, StoreError> {
    let (mut record, user) = row;
    record.user_id = user.as_deref().map(parse_uuid).transpose()?;
    Ok(record)
}

type SubscriptionRow = (SubscriptionRecord, Option<String>);

fn subscription_row(r: &Row<'_>) -> rusqlite::Result<SubscriptionRow> {
    Ok((
        SubscriptionRecord {
            original_transaction_id: r.get(0)?,
            user_id: None,
            store: r.get(2)?,
            product_id: r.get(3)?,
            purchase_time_ms: r.get(4)?,
            expire_time_ms: r.get(5)?,
            refund_time_ms: r.get(6)?,
            environment: r.get(7)?,
            raw_response: r.get(8)?,
            raw_notification: r.get(9)?,
            create_time_ms: r.get(10)?,
            update_time_ms: r.get(11)?,
        },
        r.get(1)?,
    ))
}

fn subscription_with_user(row: SubscriptionRow) -> Result<SubscriptionRecord, StoreError> {
    let (mut record, user) = row;
    record.user_id = user.as_deref().map(parse_uuid).transpose()?;
    Ok(record)
}

fn upsert_purchases(
    conn: &Connection,
    purchases: &[PurchaseRecord],
) -> Result<Vec<StoredPurchase>, StoreError> {
    let mut upsert = conn
        .prepare_cached(&format!(
            "INSERT INTO purchases (transaction_id, user_id, store, product_id, purchase_time_ms,
                 refund_time_ms, environment, raw_response, create_time_ms, update_time_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)
             ON CONFLICT (transaction_id) DO UPDATE SET
                 replays = purchases.replays + 1,
                 update_time_ms = excluded.update_time_ms,
                 refund_time_ms = CASE WHEN excluded.refund_time_ms > 0
                     THEN excluded.refund_time_ms ELSE purchases.refund_time_ms END
             RETURNING {PURCHASE_COLUMNS}, replays"
        ))
        .map_err(db_error)?;
    let mut stored = Vec::with_capacity(purchases.len());
    for p in purchases {
        let (row, replays) = upsert
            .query_row(
                params![
                    p.transaction_id,
                    p.user_id.map(|u| u.to_string()),
                    p.store,
                    p.product_id,
                    p.purchase_time_ms,
                    p.refund_time_ms,
                    p.environment,
                    p.raw_response,
                    p.update_time_ms,
                ],
                |r| Ok((purchase_row(r)?, r.get::<_, i64>(10)?)),
            )
            .map_err(db_error)?;
        stored.push(StoredPurchase {
            record: with_user(row)?,
            seen_before: replays > 0,
        });
    }
    Ok(stored)
}

fn upsert_subscriptions(
    conn: &Connection,
    subscriptions: &[SubscriptionRecord],
) -> Result<Vec<SubscriptionRecord>, StoreError> {
    let mut upsert = conn
        .prepare_cached(&format!(
            "INSERT INTO subscriptions (original_transaction_id, user_id, store, product_id,
                 purchase_time_ms, expire_time_ms, refund_time_ms, environment, raw_response,
                 raw_notification, create_time_ms, update_time_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)
             ON CONFLICT (original_transaction_id) DO UPDATE SET
                 user_id = coalesce(subscriptions.user_id, excluded.user_id),
                 product_id = excluded.product_id,
                 expire_time_ms = excluded.expire_time_ms,
                 update_time_ms = excluded.update_time_ms,
                 raw_response = CASE WHEN excluded.raw_response <> ''
                     THEN excluded.raw_response ELSE subscriptions.raw_response END,
                 raw_notification = CASE WHEN excluded.raw_notification <> ''
                     THEN excluded.raw_notification ELSE subscriptions.raw_notification END,
                 refund_time_ms = CASE WHEN excluded.refund_time_ms > 0
                     THEN excluded.refund_time_ms ELSE subscriptions.refund_time_ms END
             RETURNING {SUBSCRIPTION_COLUMNS}"
        ))
        .map_err(db_error)?;
    let mut stored = Vec::with_capacity(subscriptions.len());
    for s in subscriptions {
        let row = upsert
            .query_row(
                params![
                    s.original_transaction_id,
                    s.user_id.map(|u| u.to_string()),
                    s.store,
                    s.product_id,
                    s.purchase_time_ms,
                    s.expire_time_ms,
                    s.refund_time_ms,
                    s.environment,
                    s.raw_response,
                    s.raw_notification,
                    s.update_time_ms,
                ],
                subscription_row,
            )
            .map_err(db_error)?;
        stored.push(subscription_with_user(row)?);
    }
    Ok(stored)
}

/// The statement of a page of `table` (newest first by `purchase_time_ms`, then `id`):
/// `?1` the user (when the page has one), `?2`/`?3` the position (when it has one), `?4` the
/// limit.
fn page_sql(table: &str, columns: &str, id: &str, page: &Page) -> String {
    let mut conditions = Vec::new();
    if page.user_id.is_some() {
        conditions.push("user_id = ?1".to_owned());
    }
    let (op, order) = if page.backward {
        (">", "ASC")
    } else {
        ("<", "DESC")
    };
    if page.after.is_some() {
        conditions.push(format!("(purchase_time_ms, {id}) {op} (?2, ?3)"));
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    format!(
        "SELECT {columns} FROM {table} {filter}
         ORDER BY purchase_time_ms {order}, {id} {order} LIMIT ?4"
    )
}

fn page_rows<T>(
    conn: &Connection,
    sql: &str,
    page: &Page,
    read: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    let mut statement = conn.prepare_cached(sql).map_err(db_error)?;
    // Every statement's highest placeholder is ?4, so all four bind (unused ones are ignored).
    let user = page.user_id.map(|u| u.to_string());
    let (time, id) = page.after.clone().unzip();
    let mut rows = statement
        .query(params![user, time, id, page.limit as i64])
        .map_err(db_error)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(db_error)? {
        out.push(read(row).map_err(db_error)?);
    }
    Ok(out)
}

#[async_trait]
impl PurchaseStore for SqliteStore {
    async fn upsert_purchases(
        &self,
        purchases: Vec<PurchaseRecord>,
    ) -> Result<Vec<StoredPurchase>, StoreError> {
        self.write("purchase_upsert", move |conn| {
            upsert_purchases(conn, &purchases)
        })
        .await
    }

    async fn purchase(&self, transaction_id: String) -> Result<Option<PurchaseRecord>, StoreError> {
        self.read("purchase_get", move |conn| {
            let row = conn
                .prepare_cached(&format!(
                    "SELECT {PURCHASE_COLUMNS} FROM purchases WHERE transaction_id = ?1"
                ))
                .and_then(|mut s| s.query_row([transaction_id], purchase_row).optional())
                .map_err(db_error)?;
            row.map(with_user).transpose()
        })
        .await
    }

    async fn list_purchases(&self, page: Page) -> Result<Vec<PurchaseRecord>, StoreError> {
        self.read("purchase_list", move |conn| {
            let sql = page_sql("purchases", PURCHASE_COLUMNS, "transaction_id", &page);
            page_rows(conn, &sql, &page, purchase_row)?
                .into_iter()
                .map(with_user)
                .collect()
        })
        .await
    }

    async fn upsert_subscriptions(
        &self,
        subscriptions: Vec<SubscriptionRecord>,
    ) -> Result<Vec<SubscriptionRecord>, StoreError> {
        self.write("subscription_upsert", move |conn| {
            upsert_subscriptions(conn, &subscriptions)
        })
        .await
    }

    async fn subscription(
        &self,
        original_transaction_id: String,
    ) -> Result<Option<SubscriptionRecord>, StoreError> {
        self.read("subscription_get", move |conn| {
            let row = conn
                .prepare_cached(&format!(
                    "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions
                     WHERE original_transaction_id = ?1"
                ))
                .and_then(|mut s| {
                    s.query_row([original_transaction_id], subscription_row)
                        .optional()
                })
                .map_err(db_error)?;
            row.map(subscription_with_user).transpose()
        })
        .await
    }

    async fn subscription_by_product(
        &self,
        user_id: Uuid,
        product_id: String,
    ) -> Result<Option<SubscriptionRecord>, StoreError> {
        self.read("subscription_by_product", move |conn| {
            let row = conn
                .prepare_cached(&format!(
                    "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions
                     WHERE user_id = ?1 AND product_id = ?2
                     ORDER BY expire_time_ms DESC LIMIT 1"
                ))
                .and_then(|mut s| {
                    s.query_row(params![user_id.to_string(), product_id], subscription_row)
                        .optional()
                })
                .map_err(db_error)?;
            row.map(subscription_with_user).transpose()
        })
        .await
    }

    async fn list_subscriptions(&self, page: Page) -> Result<Vec<SubscriptionRecord>, StoreError> {
        self.read("subscription_list", move |conn| {
            let sql = page_sql(
                "subscriptions",
                SUBSCRIPTION_COLUMNS,
                "original_transaction_id",
                &page,
            );
            page_rows(conn, &sql, &page, subscription_row)?
                .into_iter()
                .map(subscription_with_user)
                .collect()
        })
        .await
    }
}
