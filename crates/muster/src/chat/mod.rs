//! Chat channels: Nakama's `channel_join`, `channel_leave`, `channel_message_send`,
//! `channel_message_update` and `channel_message_remove` on the realtime socket, with
//! `channel_presence_event`s to members and history kept in the store when a join asks for it.
//!
//! - `rules`: what a client may send (room names, content, join targets);
//! - `ids`: channel id fields and self-verifying message ids;
//! - `handlers`: the five requests, answered in the socket's task;
//! - `presence`: the `channel_presence_event`s members are told of;
//! - `history` + `cursor`: stored history, a page at a time.
//!
//! Who is in which channel is not chat's to keep: it reaches members only through the
//! `Router` (on one node, the session layer's channel registry, `crate::session::channels`).
//!
//! The flow of a message: the sender's socket task admits it (rate limit, membership), checks
//! its content, stores it when the sender joined with persistence (and waits until that write is
//! durable), encodes it once per format and queues a cheap clone on every member's outbox (the
//! sender's included, as Nakama does), then answers the sender with the ack.

pub mod config;
pub(crate) mod postgres;
pub(crate) mod sqlite;
pub mod store;

pub(crate) mod cursor;
pub(crate) mod handlers;
pub(crate) mod history;
pub(crate) mod ids;
pub(crate) mod presence;
pub(crate) mod rules;
pub(crate) mod server;

use std::sync::Arc;

pub use handlers::handle;
use ids::MessageIds;

use crate::accounts::Accounts;
use crate::base::metrics::Metrics;
use crate::chat::config::ChatConfig;
use crate::chat::store::ChatStore;
use crate::cluster::Router;
use crate::friends::Friends;
use crate::groups::Groups;
use crate::store::{SecretStore, StoreError};

/// The chat service every socket task shares.
pub struct Chat {
    /// Channel membership and fanout, on this node or across the cluster.
    pub router: Arc<dyn Router>,
    pub ids: MessageIds,
    pub config: ChatConfig,
    /// Where persisted messages go.
    pub messages: Arc<dyn ChatStore>,
    /// Who may talk to whom: a direct chat needs the other player to exist and not to have
    /// blocked the caller; a group's channel is for its members.
    pub peers: ChatPeers,
    pub metrics: Arc<Metrics>,
}

/// The services chat asks who may talk to whom (their public services, never their stores).
pub struct ChatPeers {
    pub accounts: Arc<Accounts>,
    pub friends: Arc<Friends>,
    pub groups: Arc<Groups>,
}

impl Chat {
    /// Builds the service; the message-id key is generated once and kept in the database.
    pub async fn new(
        config: &ChatConfig,
        secrets: &dyn SecretStore,
        messages: Arc<dyn ChatStore>,
        peers: ChatPeers,
        metrics: Arc<Metrics>,
        router: Arc<dyn Router>,
    ) -> Result<Chat, StoreError> {
        let stored = secrets
            .secret("channel_message_key", MessageIds::random_key_hex())
            .await?;
        let key = MessageIds::key_from_hex(&stored).ok_or_else(|| {
            StoreError::Database("secret channel_message_key is not 32 hex digits".into())
        })?;
        Ok(Chat {
            router,
            ids: MessageIds::new(key),
            config: config.clone(),
            messages,
            peers,
            metrics,
        })
    }
}

/// Why a chat request was refused. The text is shown to the client; [`ChatError::reason`] is the
/// metric label and the error's `context.reason`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    #[error("Invalid channel identifier: {0}")]
    InvalidChannelId(String),
    #[error("Not a member of channel '{channel_id}': join it first")]
    NotJoined { channel_id: String },
    #[error("Invalid room name: {0}")]
    InvalidRoomName(String),
    #[error("Invalid channel join: {0}")]
    InvalidTarget(String),
    #[error("User not found: a direct chat needs an existing user")]
    UserNotFound,
    /// The other user blocked the caller (Nakama: no direct messages then).
    #[error("Cannot chat with this user: they blocked you")]
    Blocked,
    #[error("Not a member of this group: only its members may join its chat")]
    NotGroupMember,
    #[error("Too many channels on this socket (at most {max}): leave one first")]
    TooManyChannels { max: usize },
    #[error("Message content is larger than {max} bytes")]
    ContentTooLarge { max: usize },
    #[error("Message content must be a JSON object, e.g. {{\"text\":\"hi\"}}")]
    ContentNotObject,
    #[error("Invalid message identifier: expected a message id this server issued")]
    InvalidMessageId,
    #[error("Message not found in this channel, or not sent by you")]
    MessageNotFound,
    #[error("Too many messages: at most {per_sec} per second on one socket")]
    RateLimited { per_sec: u32 },
    #[error("Could not store the message; it was not sent")]
    Storage,
}

impl ChatError {
    /// A [`ChatError::NotJoined`] naming (the start of) the id the client gave.
    pub fn not_joined(channel_id: &str) -> ChatError {
        ChatError::NotJoined {
            channel_id: channel_id.chars().take(128).collect(),
        }
    }

    /// Short, stable name: the metric label and the error envelope's `context.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            ChatError::InvalidChannelId(_) => "invalid_channel_id",
            ChatError::NotJoined { .. } => "not_joined",
            ChatError::InvalidRoomName(_) => "invalid_room_name",
            ChatError::InvalidTarget(_) => "invalid_target",
            ChatError::UserNotFound => "user_not_found",
            ChatError::Blocked => "blocked",
            ChatError::NotGroupMember => "not_group_member",
            ChatError::TooManyChannels { .. } => "too_many_channels",
            ChatError::ContentTooLarge { .. } => "content_too_large",
            ChatError::ContentNotObject => "content_not_object",
            ChatError::InvalidMessageId => "invalid_message_id",
            ChatError::MessageNotFound => "message_not_found",
            ChatError::RateLimited { .. } => "rate_limited",
            ChatError::Storage => "storage",
        }
    }
}

impl From<StoreError> for ChatError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound => ChatError::MessageNotFound,
            other => {
                tracing::warn!(error = %other, "chat storage failed");
                ChatError::Storage
            }
        }
    }
}
