//! Validated purchases and subscriptions in the store ([`PurchaseStore`]).
//!
//! A purchase is keyed by its store's transaction id and a subscription by its original
//! transaction id, each unique across the whole database: whichever node stores one first owns
//! it, and every later store of the same id — on any node — finds it there (`seen_before`). The
//! insert-if-absent is one statement on both engines (`INSERT … ON CONFLICT DO UPDATE …
//! RETURNING`), so two nodes storing one receipt at the same moment cannot both insert it.

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::StoreError;

/// A validated purchase as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurchaseRecord {
    /// Its owner: who validated it first. `None` once that account is deleted, or for a refund
    /// notification of a purchase no user was found for.
    pub user_id: Option<Uuid>,
    /// `StoreProvider` (0 Apple, 1 Google, 2 Huawei, 3 Facebook Instant).
    pub store: i32,
    pub transaction_id: String,
    pub product_id: String,
    pub purchase_time_ms: i64,
    /// 0: not refunded.
    pub refund_time_ms: i64,
    /// `StoreEnvironment` (1 sandbox, 2 production).
    pub environment: i32,
    /// What the store answered (JSON), as received.
    pub raw_response: String,
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// A purchase as the store holds it after an upsert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPurchase {
    pub record: PurchaseRecord,
    /// It was stored before this upsert (by any user, on any node).
    pub seen_before: bool,
}

/// A validated subscription as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionRecord {
    /// Its owner: who validated it first (`None` as for [`PurchaseRecord::user_id`]).
    pub user_id: Option<Uuid>,
    pub store: i32,
    pub original_transaction_id: String,
    pub product_id: String,
    pub purchase_time_ms: i64,
    pub expire_time_ms: i64,
    /// 0: not refunded.
    pub refund_time_ms: i64,
    pub environment: i32,
    /// The store's answer to the latest validation (JSON), or empty.
    pub raw_response: String,
    /// The latest notification about it (JSON), or empty.
    pub raw_notification: String,
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// A page of a listing, newest purchase first: the rows strictly after `after` (a position,
/// `(purchase_time_ms, id)`) in that order, or — `backward` — strictly before it, nearest
/// first; at most `limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Only this user's; `None`: every user's (server code).
    pub user_id: Option<Uuid>,
    pub after: Option<(i64, String)>,
    pub backward: bool,
    pub limit: usize,
}

/// Stored purchases and subscriptions. Each write is durable when its future resolves.
#[async_trait]
pub trait PurchaseStore: Send + Sync {
    /// Stores each of `purchases` (transaction ids distinct) unless its transaction id is
    /// stored already; a stored one keeps its owner and fields, except that its `update_time_ms`
    /// becomes the given one and a non-zero `refund_time_ms` is taken. Answers the rows as
    /// stored, in the order given. All or none; `NotFound` when a named user does not exist.
    async fn upsert_purchases(
        &self,
        purchases: Vec<PurchaseRecord>,
    ) -> Result<Vec<StoredPurchase>, StoreError>;

    /// The purchase of `transaction_id`.
    async fn purchase(&self, transaction_id: String) -> Result<Option<PurchaseRecord>, StoreError>;

    /// A page of purchases (see [`Page`]).
    async fn list_purchases(&self, page: Page) -> Result<Vec<PurchaseRecord>, StoreError>;

    /// Stores each of `subscriptions` (original transaction ids distinct), or updates the one
    /// stored: its product, expiry and `update_time_ms` become the given ones, a non-empty
    /// response or notification and a non-zero refund time are taken, an owner is taken when it
    /// had none; its owner, store and purchase time stay otherwise. Answers the rows as stored, in the order given. All or none;
    /// `NotFound` when a named user does not exist.
    async fn upsert_subscriptions(
        &self,
        subscriptions: Vec<SubscriptionRecord>,
    ) -> Result<Vec<SubscriptionRecord>, StoreError>;

    /// The subscription of `original_transaction_id`.
    async fn subscription(
        &self,
        original_transaction_id: String,
    ) -> Result<Option<SubscriptionRecord>, StoreError>;

    /// `user_id`'s subscription to `product_id` that expires last.
    async fn subscription_by_product(
        &self,
        user_id: Uuid,
        product_id: String,
    ) -> Result<Option<SubscriptionRecord>, StoreError>;

    /// A page of subscriptions (see [`Page`]; the id is the original transaction id).
    async fn list_subscriptions(&self, page: Page) -> Result<Vec<SubscriptionRecord>, StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] =
    &[crate::migration!(22, "purchases", "0022_purchases")];
