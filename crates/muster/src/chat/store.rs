//! Chat in the store: channel messages and their history ([`ChatStore`]).

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::StoreError;

/// A chat message kept in a channel's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelMessageRecord {
    pub id: Uuid,
    /// Nakama's channel id (`2...room`, `4.userA.userB.`).
    pub channel_id: String,
    /// 0 chat (an update changes the content, not the code).
    pub code: i32,
    pub sender_id: Uuid,
    pub username: String,
    /// A JSON object, as text.
    pub content: String,
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// A stored message and its position in the history (insertion order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRow {
    pub seq: i64,
    pub message: ChannelMessageRecord,
}

/// Which rows of a channel's history to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryQuery {
    pub channel_id: String,
    /// Oldest first when true, newest first when false.
    pub ascending: bool,
    /// Only rows past this position in the reading direction (`seq >` ascending, `seq <`
    /// descending).
    pub from_seq: Option<i64>,
    pub limit: usize,
}

/// Chat: persisted channel messages and their history.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait ChatStore: Send + Sync {
    /// Stores a chat message; durable when the future resolves. Concurrent calls are written
    /// together (one transaction for many messages).
    async fn insert_channel_message(&self, message: ChannelMessageRecord)
        -> Result<(), StoreError>;

    /// Replaces the content of message `id` in `channel_id` if `sender` sent it; returns its
    /// creation time. `NotFound` when there is no such message of that sender.
    async fn update_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
        content: String,
        now_ms: i64,
    ) -> Result<i64, StoreError>;

    /// Deletes message `id` in `channel_id` if `sender` sent it; returns its creation time.
    /// `NotFound` when there is no such message of that sender.
    async fn delete_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
    ) -> Result<i64, StoreError>;

    /// Reads a slice of a channel's history.
    async fn channel_messages(&self, query: HistoryQuery) -> Result<Vec<HistoryRow>, StoreError>;

    /// Up to `limit` messages `sender` sent, in any channel, newest first, before `before_seq`.
    async fn sender_messages(
        &self,
        sender: Uuid,
        before_seq: Option<i64>,
        limit: usize,
    ) -> Result<Vec<HistoryRow>, StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] = &[crate::migration!(
    2,
    "channel_messages",
    "0002_channel_messages"
)];
