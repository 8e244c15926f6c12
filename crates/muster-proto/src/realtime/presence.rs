//! Who is where: a user's session as seen by the other members of a channel or match.

use serde::{Deserialize, Serialize};

use crate::wire::{is_false, nullable};

/// One session of one user in a channel, match or stream (Nakama's `rtapi.UserPresence`).
#[derive(Clone, PartialEq, Eq, Hash, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct UserPresence {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "userId")]
    pub user_id: String,
    /// The connection: a user may have several.
    #[prost(string, tag = "2")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "sessionId")]
    pub session_id: String,
    #[prost(string, tag = "3")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub username: String,
    /// Whether this presence's messages are persisted, where the stream has that notion.
    #[prost(bool, tag = "4")]
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub persistence: bool,
    /// A status message, where the stream has one.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}
