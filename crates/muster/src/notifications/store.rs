//! Notifications in the store ([`NotificationStore`]).

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::StoreError;

/// A notification kept for its user until they delete it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationRecord {
    /// Its place in the store's order (0 until stored); listings follow it.
    pub seq: i64,
    pub id: Uuid,
    pub user_id: Uuid,
    pub subject: String,
    /// A JSON object, as text.
    pub content: String,
    pub code: i32,
    /// `None`: sent by the system.
    pub sender_id: Option<Uuid>,
    pub create_time_ms: i64,
}

/// A change to a stored notification (`nk.notificationsUpdate`); `None` keeps a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationUpdate {
    pub id: Uuid,
    pub subject: Option<String>,
    /// A JSON object, as text.
    pub content: Option<String>,
    pub sender_id: Option<Uuid>,
}

/// Stored notifications. Each write is durable when its future resolves.
#[async_trait]
pub trait NotificationStore: Send + Sync {
    /// Stores `records` (any users'); of each user's notifications only the newest
    /// `max_per_user` are kept. `NotFound` when a user does not exist (nothing is stored).
    async fn insert_notifications(
        &self,
        records: Vec<NotificationRecord>,
        max_per_user: usize,
    ) -> Result<(), StoreError>;

    /// `user_id`'s notifications in the order they were stored, those after `after_seq`; at
    /// most `limit`.
    async fn list_notifications(
        &self,
        user_id: Uuid,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<NotificationRecord>, StoreError>;

    /// The stored notifications of `ids` (those of `user_id` only, when given), in no
    /// particular order.
    async fn notifications_by_id(
        &self,
        ids: Vec<Uuid>,
        user_id: Option<Uuid>,
    ) -> Result<Vec<NotificationRecord>, StoreError>;

    /// Deletes the stored notifications of `ids`, whoever's they are; how many.
    async fn delete_notifications_by_id(&self, ids: Vec<Uuid>) -> Result<usize, StoreError>;

    /// Applies `updates` (all or none); how many notifications they found.
    async fn update_notifications(
        &self,
        updates: Vec<NotificationUpdate>,
    ) -> Result<usize, StoreError>;

    /// Deletes those of `ids` that are `user_id`'s; how many.
    async fn delete_notifications(
        &self,
        user_id: Uuid,
        ids: Vec<Uuid>,
    ) -> Result<usize, StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] =
    &[crate::migration!(14, "notifications", "0014_notifications")];
