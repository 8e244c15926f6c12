//! Notifications (Nakama's `api.Notification`), as `GET /v2/notification` lists them and as the
//! realtime `notifications` envelope (`rtapi.Notifications`) delivers them.

use serde::{Deserialize, Serialize};

use crate::wire::{is_zero_i32, nullable, Timestamp};

/// One notification to a user.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Notification {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    #[serde(deserialize_with = "nullable")]
    pub subject: String,
    /// A JSON object, as a string.
    #[prost(string, tag = "3")]
    #[serde(deserialize_with = "nullable")]
    pub content: String,
    /// Negative codes are Nakama's system notifications (friend requests, group joins, …).
    #[prost(int32, tag = "4")]
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub code: i32,
    /// The sending user; empty for the system.
    #[prost(string, tag = "5")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "senderId")]
    pub sender_id: String,
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(alias = "createTime")]
    pub create_time: Option<Timestamp>,
    /// Whether it was stored (and so is listed until deleted).
    #[prost(bool, tag = "7")]
    #[serde(skip_serializing_if = "is_false")]
    pub persistent: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// The realtime `notifications` envelope: notifications delivered as they are sent.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Notifications {
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<Notification>,
}
