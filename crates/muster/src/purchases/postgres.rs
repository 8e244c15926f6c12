//! Purchases and subscriptions on PostgreSQL. An upsert is one [`Write`] of the group-commit
//! writer: one `INSERT … SELECT FROM unnest(…) ON CONFLICT DO UPDATE … RETURNING` for all the
//! rows of a validation, keyed by its first id, rows in id order (two validations sharing ids
//! lock them in one order). The unique key decides between nodes: a second node's insert of the
//! same id waits for the first's commit, then updates the row it finds (`replays + 1`) and
//! answers it. Reads use the pool.

use async_trait::async_trait;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::purchases::store::{
    Page, PurchaseRecord, PurchaseStore, StoredPurchase, SubscriptionRecord,
};
use crate::store::postgres::writer::{key_of, Write};
use crate::store::postgres::{db_error, prepared, PostgresStore};
use crate::store::StoreError;

const PURCHASE_COLUMNS: &str = "transaction_id, user_id, store, product_id, purchase_time_ms,
    refund_time_ms, environment, raw_response, create_time_ms, update_time_ms";

const SUBSCRIPTION_COLUMNS: &str = "original_transaction_id, user_id, store, product_id,
    purchase_time_ms, expire_time_ms, refund_time_ms, environment, raw_response, raw_notification,
    create_time_ms, update_time_ms";

fn purchase_from(row: &Row) -> PurchaseRecord {
    PurchaseRecord {
        transaction_id: row.get(0),
        user_id: row.get(1),
        store: row.get(2),
        product_id: row.get(3),
        purchase_time_ms: row.get(4),
        refund_time_ms: row.get(5),
        environment: row.get(6),
        raw_response: row.get(7),
        create_time_ms: row.get(8),
        update_time_ms: row.get(9),
    }
}

fn subscription_from(row: &Row) -> SubscriptionRecord {
    SubscriptionRecord {
        original_transaction_id: row.get(0),
        user_id: row.get(1),
        store: row.get(2),
        product_id: row.get(3),
        purchase_time_ms: row.get(4),
        expire_time_ms: row.get(5),
        refund_time_ms: row.get(6),
        environment: row.get(7),
        raw_response: row.get(8),
        raw_notification: row.get(9),
        create_time_ms: row.get(10),
        update_time_ms: row.get(11),
    }
}

/// Whether a write may pass when run again: not when a named user does not exist.
fn retryable(error: &tokio_postgres::Error) -> bool {
    error.code() != Some(&SqlState::FOREIGN_KEY_VIOLATION)
        && crate::store::postgres::writer::is_retryable(error)
}

/// The rows of one purchase validation (see the module documentation), as columns.
struct UpsertPurchases {
    order: Vec<String>,
    ids: Vec<String>,
    users: Vec<Option<Uuid>>,
    stores: Vec<i32>,
    products: Vec<String>,
    purchase_times: Vec<i64>,
    refund_times: Vec<i64>,
    environments: Vec<i32>,
    raws: Vec<String>,
    update_times: Vec<i64>,
}

impl UpsertPurchases {
    fn of(mut purchases: Vec<PurchaseRecord>) -> UpsertPurchases {
        let order = purchases.iter().map(|p| p.transaction_id.clone()).collect();
        purchases.sort_by(|a, b| a.transaction_id.cmp(&b.transaction_id));
        let mut w = UpsertPurchases {
            order,
            ids: Vec::new(),
            users: Vec::new(),
            stores: Vec::new(),
            products: Vec::new(),
            purchase_times: Vec::new(),
            refund_times: Vec::new(),
            environments: Vec::new(),
            raws: Vec::new(),
            update_times: Vec::new(),
        };
        for p in purchases {
            w.ids.push(p.transaction_id);
            w.users.push(p.user_id);
            w.stores.push(p.store);
            w.products.push(p.product_id);
            w.purchase_times.push(p.purchase_time_ms);
            w.refund_times.push(p.refund_time_ms);
            w.environments.push(p.environment);
            w.raws.push(p.raw_response);
            w.update_times.push(p.update_time_ms);
        }
        w
    }
}

impl Write for UpsertPurchases {
    type Output = Vec<StoredPurchase>;
    const PATH: &'static str = "purchase_upsert";
    const SQL: &'static str = "
INSERT INTO purchases AS p (transaction_id, user_id, store, product_id, purchase_time_ms,
    refund_time_ms, environment, raw_response, create_time_ms, update_time_ms)
SELECT x.id, x.user_id, x.store, x.product_id, x.purchase_time_ms, x.refund_time_ms,
    x.environment, x.raw_response, x.update_time_ms, x.update_time_ms
FROM unnest($1::text[], $2::uuid[], $3::int4[], $4::text[], $5::int8[], $6::int8[], $7::int4[],
    $8::text[], $9::int8[])
    AS x (id, user_id, store, product_id, purchase_time_ms, refund_time_ms, environment,
        raw_response, update_time_ms)
ORDER BY x.id
ON CONFLICT (transaction_id) DO UPDATE SET
    replays = p.replays + 1,
    update_time_ms = EXCLUDED.update_time_ms,
    refund_time_ms = CASE WHEN EXCLUDED.refund_time_ms > 0
        THEN EXCLUDED.refund_time_ms ELSE p.refund_time_ms END
RETURNING p.transaction_id, p.user_id, p.store, p.product_id, p.purchase_time_ms,
    p.refund_time_ms, p.environment, p.raw_response, p.create_time_ms, p.update_time_ms,
    p.replays";
    const TYPES: &'static [Type] = &[
        Type::TEXT_ARRAY,
        Type::UUID_ARRAY,
        Type::INT4_ARRAY,
        Type::TEXT_ARRAY,
        Type::INT8_ARRAY,
        Type::INT8_ARRAY,
        Type::INT4_ARRAY,
        Type::TEXT_ARRAY,
        Type::INT8_ARRAY,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.ids,
            &self.users,
            &self.stores,
            &self.products,
            &self.purchase_times,
            &self.refund_times,
            &self.environments,
            &self.raws,
            &self.update_times,
        ]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<Vec<StoredPurchase>, StoreError> {
        let mut stored: Vec<StoredPurchase> = rows
            .iter()
            .map(|row| StoredPurchase {
                record: purchase_from(row),
                seen_before: row.get::<_, i64>(10) > 0,
            })
            .collect();
        if stored.len() != self.order.len() {
            return Err(StoreError::Database(format!(
                "purchase upsert answered {} rows for {}",
                stored.len(),
                self.order.len()
            )));
        }
        stored.sort_by_key(|s| {
            self.order
                .iter()
                .position(|id| *id == s.record.transaction_id)
        });
        Ok(stored)
    }

    fn retryable(&self, error: &tokio_postgres::Error) -> bool {
        retryable(error)
    }
}

/// The rows of one subscription validation or notification, as columns.
struct UpsertSubscriptions {
    order: Vec<String>,
    ids: Vec<String>,
    users: Vec<Option<Uuid>>,
    stores: Vec<i32>,
    products: Vec<String>,
    purchase_times: Vec<i64>,
    expire_times: Vec<i64>,
    refund_times: Vec<i64>,
    environments: Vec<i32>,
    responses: Vec<String>,
    notifications: Vec<String>,
    update_times: Vec<i64>,
}

impl UpsertSubscriptions {
    fn of(mut subscriptions: Vec<SubscriptionRecord>) -> UpsertSubscriptions {
        let order = subscriptions
            .iter()
            .map(|s| s.original_transaction_id.clone())
            .collect();
        subscriptions.sort_by(|a, b| a.original_transaction_id.cmp(&b.original_transaction_id));
        let mut w = UpsertSubscriptions {
            order,
            ids: Vec::new(),
            users: Vec::new(),
            stores: Vec::new(),
            products: Vec::new(),
            purchase_times: Vec::new(),
            expire_times: Vec::new(),
            refund_times: Vec::new(),
            environments: Vec::new(),
            responses: Vec::new(),
            notifications: Vec::new(),
            update_times: Vec::new(),
        };
        for s in subscriptions {
            w.ids.push(s.original_transaction_id);
            w.users.push(s.user_id);
            w.stores.push(s.store);
            w.products.push(s.product_id);
            w.purchase_times.push(s.purchase_time_ms);
            w.expire_times.push(s.expire_time_ms);
            w.refund_times.push(s.refund_time_ms);
            w.environments.push(s.environment);
            w.responses.push(s.raw_response);
            w.notifications.push(s.raw_notification);
            w.update_times.push(s.update_time_ms);
        }
        w
    }
}

impl Write for UpsertSubscriptions {
    type Output = Vec<SubscriptionRecord>;
    const PATH: &'static str = "subscription_upsert";
    const SQL: &'static str = "
INSERT INTO subscriptions AS s (original_transaction_id, user_id, store, product_id,
    purchase_time_ms, expire_time_ms, refund_time_ms, environment, raw_response, raw_notification,
    create_time_ms, update_time_ms)
SELECT x.id, x.user_id, x.store, x.product_id, x.purchase_time_ms, x.expire_time_ms,
    x.refund_time_ms, x.environment, x.raw_response, x.raw_notification, x.update_time_ms,
    x.update_time_ms
FROM unnest($1::text[], $2::uuid[], $3::int4[], $4::text[], $5::int8[], $6::int8[], $7::int8[],
    $8::int4[], $9::text[], $10::text[], $11::int8[])
    AS x (id, user_id, store, product_id, purchase_time_ms, expire_time_ms, refund_time_ms,
        environment, raw_response, raw_notification, update_time_ms)
ORDER BY x.id
ON CONFLICT (original_transaction_id) DO UPDATE SET
    user_id = coalesce(s.user_id, EXCLUDED.user_id),
    product_id = EXCLUDED.product_id,
    expire_time_ms = EXCLUDED.expire_time_ms,
    update_time_ms = EXCLUDED.update_time_ms,
    raw_response = CASE WHEN EXCLUDED.raw_response <> ''
        THEN EXCLUDED.raw_response ELSE s.raw_response END,
    raw_notification = CASE WHEN EXCLUDED.raw_notification <> ''
        THEN EXCLUDED.raw_notification ELSE s.raw_notification END,
    refund_time_ms = CASE WHEN EXCLUDED.refund_time_ms > 0
        THEN EXCLUDED.refund_time_ms ELSE s.refund_time_ms END
RETURNING s.original_transaction_id, s.user_id, s.store, s.product_id, s.purchase_time_ms,
    s.expire_time_ms, s.refund_time_ms, s.environment, s.raw_response, s.raw_notification,
    s.create_time_ms, s.update_time_ms";
    const TYPES: &'static [Type] = &[
        Type::TEXT_ARRAY,
        Type::UUID_ARRAY,
        Type::INT4_ARRAY,
        Type::TEXT_ARRAY,
        Type::INT8_ARRAY,
        Type::INT8_ARRAY,
        Type::INT8_ARRAY,
        Type::INT4_ARRAY,
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::INT8_ARRAY,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.ids,
            &self.users,
            &self.stores,
            &self.products,
            &self.purchase_times,
            &self.expire_times,
            &self.refund_times,
            &self.environments,
            &self.responses,
            &self.notifications,
            &self.update_times,
        ]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<Vec<SubscriptionRecord>, StoreError> {
        let mut stored: Vec<SubscriptionRecord> = rows.iter().map(subscription_from).collect();
        if stored.len() != self.order.len() {
            return Err(StoreError::Database(format!(
                "subscription upsert answered {} rows for {}",
                stored.len(),
                self.order.len()
            )));
        }
        stored.sort_by_key(|s| {
            self.order
                .iter()
                .position(|id| *id == s.original_transaction_id)
        });
        Ok(stored)
    }

    fn retryable(&self, error: &tokio_postgres::Error) -> bool {
        retryable(error)
    }
}

/// A page of `table` (see [`Page`]): the statement and its parameters, numbered as present.
async fn page_rows(
    store: &PostgresStore,
    table: &str,
    columns: &str,
    id: &str,
    page: &Page,
) -> Result<Vec<Row>, StoreError> {
    let limit = page.limit as i64;
    let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
    let mut conditions = Vec::new();
    if let Some(user) = &page.user_id {
        params.push(user);
        conditions.push(format!("user_id = ${}", params.len()));
    }
    let (op, order) = if page.backward {
        (">", "ASC")
    } else {
        ("<", "DESC")
    };
    if let Some((time, after_id)) = &page.after {
        params.push(time);
        params.push(after_id);
        conditions.push(format!(
            "(purchase_time_ms, {id}) {op} (${}, ${})",
            params.len() - 1,
            params.len()
        ));
    }
    params.push(&limit);
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    let sql = format!(
        "SELECT {columns} FROM {table} {filter}
         ORDER BY purchase_time_ms {order}, {id} {order} LIMIT ${}",
        params.len()
    );
    let client = store.client().await?;
    let statement = prepared(&client, &sql).await?;
    client.query(&statement, &params).await.map_err(db_error)
}

#[async_trait]
impl PurchaseStore for PostgresStore {
    async fn upsert_purchases(
        &self,
        purchases: Vec<PurchaseRecord>,
    ) -> Result<Vec<StoredPurchase>, StoreError> {
        let Some(first) = purchases.iter().map(|p| &p.transaction_id).min() else {
            return Ok(Vec::new());
        };
        let key = key_of(first);
        self.writers
            .write(key, UpsertPurchases::of(purchases))
            .await
    }

    async fn purchase(&self, transaction_id: String) -> Result<Option<PurchaseRecord>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            &format!("SELECT {PURCHASE_COLUMNS} FROM purchases WHERE transaction_id = $1"),
        )
        .await?;
        let row = client
            .query_opt(&statement, &[&transaction_id])
            .await
            .map_err(db_error)?;
        Ok(row.as_ref().map(purchase_from))
    }

    async fn list_purchases(&self, page: Page) -> Result<Vec<PurchaseRecord>, StoreError> {
        let rows = page_rows(self, "purchases", PURCHASE_COLUMNS, "transaction_id", &page).await?;
        Ok(rows.iter().map(purchase_from).collect())
    }

    async fn upsert_subscriptions(
        &self,
        subscriptions: Vec<SubscriptionRecord>,
    ) -> Result<Vec<SubscriptionRecord>, StoreError> {
        let Some(first) = subscriptions
            .iter()
            .map(|s| &s.original_transaction_id)
            .min()
        else {
            return Ok(Vec::new());
        };
        let key = key_of(first);
        self.writers
            .write(key, UpsertSubscriptions::of(subscriptions))
            .await
    }

    async fn subscription(
        &self,
        original_transaction_id: String,
    ) -> Result<Option<SubscriptionRecord>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            &format!(
                "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions
                 WHERE original_transaction_id = $1"
            ),
        )
        .await?;
        let row = client
            .query_opt(&statement, &[&original_transaction_id])
            .await
            .map_err(db_error)?;
        Ok(row.as_ref().map(subscription_from))
    }

    async fn subscription_by_product(
        &self,
        user_id: Uuid,
        product_id: String,
    ) -> Result<Option<SubscriptionRecord>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            &format!(
                "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions
                 WHERE user_id = $1 AND product_id = $2
                 ORDER BY expire_time_ms DESC LIMIT 1"
            ),
        )
        .await?;
        let row = client
            .query_opt(&statement, &[&user_id, &product_id])
            .await
            .map_err(db_error)?;
        Ok(row.as_ref().map(subscription_from))
    }

    async fn list_subscriptions(&self, page: Page) -> Result<Vec<SubscriptionRecord>, StoreError> {
        let rows = page_rows(
            self,
            "subscriptions",
            SUBSCRIPTION_COLUMNS,
            "original_transaction_id",
            &page,
        )
        .await?;
        Ok(rows.iter().map(subscription_from).collect())
    }
}
