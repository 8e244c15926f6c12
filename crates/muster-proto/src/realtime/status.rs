//! Status (Nakama's `rtapi.Status*`): following other users' online presence and status
//! messages, and setting one's own.

use serde::{Deserialize, Serialize};

use super::UserPresence;

/// The answer to a follow: the followed users' sessions that appear online now.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Status {
    #[prost(message, repeated, tag = "1")]
    pub presences: Vec<UserPresence>,
}

/// Follow users (by id or username): their status changes arrive as [`StatusPresenceEvent`]s.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusFollow {
    #[prost(string, repeated, tag = "1")]
    #[serde(alias = "userIds")]
    pub user_ids: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub usernames: Vec<String>,
}

/// Followed users' sessions that appeared (or changed status: `leaves` has the old one) or
/// went offline.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusPresenceEvent {
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub joins: Vec<UserPresence>,
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leaves: Vec<UserPresence>,
}

/// Stop following users.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusUnfollow {
    #[prost(string, repeated, tag = "1")]
    #[serde(alias = "userIds")]
    pub user_ids: Vec<String>,
}

/// Set this session's status message; absent: appear offline.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusUpdate {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}
