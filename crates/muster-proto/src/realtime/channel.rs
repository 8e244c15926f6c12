//! Chat channels (Nakama's `rtapi.Channel*` and `api.ChannelMessage`).
//!
//! A channel id is Nakama's stream id, `"{mode}.{subject}.{subcontext}.{label}"`: a room is
//! `2...{room name}`, a group `3.{group id}..`, a direct chat `4.{user id}.{user id}.` with the
//! two ids in ascending order. [`ChannelId`] builds and parses them.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::presence::UserPresence;
use crate::wire::{is_zero_i32, nullable, Timestamp};

/// The `type` of a [`ChannelJoin`] (Nakama's `ChannelJoin.Type`).
pub mod channel_type {
    /// Not given: treated as [`ROOM`].
    pub const UNSPECIFIED: i32 = 0;
    /// A named room anyone can join.
    pub const ROOM: i32 = 1;
    /// A private channel between two users.
    pub const DIRECT_MESSAGE: i32 = 2;
    /// A group's channel.
    pub const GROUP: i32 = 3;
}

/// A parsed channel id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ChannelId {
    Room(String),
    Group(String),
    /// The two user ids, the smaller first.
    Direct(String, String),
}

/// Why a string is not a channel id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid channel id: {0}")]
pub struct BadChannelId(&'static str);

impl ChannelId {
    /// A direct channel between two users, whichever order they are given in.
    pub fn direct(a: &str, b: &str) -> ChannelId {
        if a <= b {
            ChannelId::Direct(a.to_owned(), b.to_owned())
        } else {
            ChannelId::Direct(b.to_owned(), a.to_owned())
        }
    }

    /// Parses Nakama's `mode.subject.subcontext.label` form. Only the shape is checked here;
    /// whether the ids name real users or groups is for the server to decide.
    pub fn parse(id: &str) -> Result<ChannelId, BadChannelId> {
        let mut parts = id.splitn(4, '.');
        let (Some(mode), Some(subject), Some(subcontext), Some(label)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(BadChannelId("expected four dot-separated parts"));
        };
        match mode {
            "2" if subject.is_empty() && subcontext.is_empty() && !label.is_empty() => {
                Ok(ChannelId::Room(label.to_owned()))
            }
            "3" if !subject.is_empty() && subcontext.is_empty() && label.is_empty() => {
                Ok(ChannelId::Group(subject.to_owned()))
            }
            "4" if !subject.is_empty()
                && !subcontext.is_empty()
                && label.is_empty()
                && subject < subcontext =>
            {
                Ok(ChannelId::Direct(subject.to_owned(), subcontext.to_owned()))
            }
            "2" | "3" | "4" => Err(BadChannelId("parts do not fit the channel type")),
            _ => Err(BadChannelId("unknown channel type")),
        }
    }

    /// The `room_name`, `group_id`, `user_id_one`, `user_id_two` fields messages carry.
    pub fn fields(&self) -> (&str, &str, &str, &str) {
        match self {
            ChannelId::Room(name) => (name, "", "", ""),
            ChannelId::Group(id) => ("", id, "", ""),
            ChannelId::Direct(one, two) => ("", "", one, two),
        }
    }
}

impl fmt::Display for ChannelId {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            ChannelId::Room(name) => write!(f, "2...{name}"),
            ChannelId::Group(id) => write!(f, "3.{id}.."),
            ChannelId::Direct(one, two) => write!(f, "4.{one}.{two}."),
        }
    }
}

/// Server → client: the channel just joined, with who is in it.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Channel {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub id: String,
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub presences: Vec<UserPresence>,
    /// The joining session's own presence.
    #[prost(message, optional, tag = "3")]
    #[serde(rename = "self", skip_serializing_if = "Option::is_none")]
    pub self_presence: Option<UserPresence>,
    #[prost(string, tag = "4")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "roomName")]
    pub room_name: String,
    #[prost(string, tag = "5")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "groupId")]
    pub group_id: String,
    #[prost(string, tag = "6")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "userIdOne")]
    pub user_id_one: String,
    #[prost(string, tag = "7")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "userIdTwo")]
    pub user_id_two: String,
}

/// Client → server: join a room, a group's channel or a direct chat.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ChannelJoin {
    /// Room name, group id, or the other user's id, by `type`.
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub target: String,
    /// One of [`channel_type`].
    #[prost(int32, tag = "2")]
    #[serde(skip_serializing_if = "is_zero_i32", deserialize_with = "nullable")]
    pub r#type: i32,
    /// Whether messages sent by this session are stored in the channel's history.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistence: Option<bool>,
    /// Whether this session stays out of the channel's presence list and events.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
}

/// Client → server: leave a channel.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ChannelLeave {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "channelId")]
    pub channel_id: String,
}

/// A message on a channel, as delivered live and as listed from history (`api.ChannelMessage`).
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ChannelMessage {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "channelId")]
    pub channel_id: String,
    #[prost(string, tag = "2")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "messageId")]
    pub message_id: String,
    /// Message type: 0 chat, 1 chat update, 2 chat remove (Nakama's codes).
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[prost(string, tag = "4")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "senderId")]
    pub sender_id: String,
    #[prost(string, tag = "5")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub username: String,
    /// A JSON object, as a string.
    #[prost(string, tag = "6")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub content: String,
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(alias = "createTime")]
    pub create_time: Option<Timestamp>,
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(alias = "updateTime")]
    pub update_time: Option<Timestamp>,
    #[prost(message, optional, tag = "9")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent: Option<bool>,
    #[prost(string, tag = "10")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "roomName")]
    pub room_name: String,
    #[prost(string, tag = "11")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "groupId")]
    pub group_id: String,
    #[prost(string, tag = "12")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "userIdOne")]
    pub user_id_one: String,
    #[prost(string, tag = "13")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "userIdTwo")]
    pub user_id_two: String,
}

/// Server → client: the receipt for a sent, updated or removed message.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ChannelMessageAck {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "channelId")]
    pub channel_id: String,
    #[prost(string, tag = "2")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "messageId")]
    pub message_id: String,
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[prost(string, tag = "4")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub username: String,
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(alias = "createTime")]
    pub create_time: Option<Timestamp>,
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(alias = "updateTime")]
    pub update_time: Option<Timestamp>,
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent: Option<bool>,
    #[prost(string, tag = "8")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "roomName")]
    pub room_name: String,
    #[prost(string, tag = "9")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "groupId")]
    pub group_id: String,
    #[prost(string, tag = "10")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "userIdOne")]
    pub user_id_one: String,
    #[prost(string, tag = "11")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "userIdTwo")]
    pub user_id_two: String,
}

/// Client → server: send a message (a JSON object, as a string) to a joined channel.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ChannelMessageSend {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "channelId")]
    pub channel_id: String,
    #[prost(string, tag = "2")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub content: String,
}

/// Client → server: replace the content of one's own message.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ChannelMessageUpdate {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "channelId")]
    pub channel_id: String,
    #[prost(string, tag = "2")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "messageId")]
    pub message_id: String,
    #[prost(string, tag = "3")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub content: String,
}

/// Client → server: remove one's own message.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ChannelMessageRemove {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "channelId")]
    pub channel_id: String,
    #[prost(string, tag = "2")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "messageId")]
    pub message_id: String,
}

/// Server → client: sessions that joined or left a channel.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ChannelPresenceEvent {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "channelId")]
    pub channel_id: String,
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub joins: Vec<UserPresence>,
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub leaves: Vec<UserPresence>,
    #[prost(string, tag = "4")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "roomName")]
    pub room_name: String,
    #[prost(string, tag = "5")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "groupId")]
    pub group_id: String,
    #[prost(string, tag = "6")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "userIdOne")]
    pub user_id_one: String,
    #[prost(string, tag = "7")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "userIdTwo")]
    pub user_id_two: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ids_round_trip_in_nakama_form() {
        let room = ChannelId::Room("lobby".into());
        assert_eq!(room.to_string(), "2...lobby");
        assert_eq!(ChannelId::parse("2...lobby"), Ok(room));
        let group = ChannelId::Group("g1".into());
        assert_eq!(group.to_string(), "3.g1..");
        assert_eq!(ChannelId::parse("3.g1.."), Ok(group));
        let direct = ChannelId::direct("b", "a");
        assert_eq!(direct.to_string(), "4.a.b.");
        assert_eq!(ChannelId::parse("4.a.b."), Ok(direct.clone()));
        assert_eq!(direct.fields(), ("", "", "a", "b"));
        // A room name may itself contain dots.
        assert_eq!(
            ChannelId::parse("2...a.b"),
            Ok(ChannelId::Room("a.b".into()))
        );
        for bad in [
            "", "2..", "2...", "9...x", "3...", "4.b.a.", "4.a.a.", "3.g.x.", "lobby",
        ] {
            assert!(ChannelId::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
