//! What a client may send: room names, message content, join targets. Each rule refuses with a
//! [`ChatError`] that names the problem; nothing here touches shared state.

use std::fmt;

use muster_proto::realtime::{channel_type, ChannelId};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use uuid::Uuid;

use super::ChatError;

/// Checks a room name: 1 to `max_chars` characters, no control characters.
pub fn check_room_name(name: &str, max_chars: usize) -> Result<(), ChatError> {
    if name.is_empty() {
        return Err(ChatError::InvalidRoomName(
            "a room name must not be empty".into(),
        ));
    }
    if name.chars().count() > max_chars {
        return Err(ChatError::InvalidRoomName(format!(
            "a room name has at most {max_chars} characters"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(ChatError::InvalidRoomName(
            "a room name must not contain control characters".into(),
        ));
    }
    Ok(())
}

/// Checks message content: at most `max_bytes`, and a JSON object (Nakama's rule: content is
/// always an object, so clients can `JSON.parse` it and read fields).
pub fn check_content(content: &str, max_bytes: usize) -> Result<(), ChatError> {
    if content.len() > max_bytes {
        return Err(ChatError::ContentTooLarge { max: max_bytes });
    }
    serde_json::from_str::<JsonObject>(content)
        .map(|_| ())
        .map_err(|_| ChatError::ContentNotObject)
}

/// A JSON object, checked without building it: keys and values are skipped as they are read.
struct JsonObject;

impl<'de> Deserialize<'de> for JsonObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = JsonObject;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonObject, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(JsonObject)
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}

/// A join request's target, read into the channel it names. Direct chats still need the other
/// user to exist, which the caller checks (it needs the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Room(ChannelId),
    /// The direct channel and the other user's id.
    Direct(ChannelId, Uuid),
    /// The group's channel and the group's id.
    Group(ChannelId, Uuid),
}

/// Reads a `channel_join`'s `target` and `type` for the user `me`.
///
/// A group's chat is open to its members only, which the caller checks (it needs the store).
pub fn target(
    target: &str,
    kind: i32,
    me: &Uuid,
    max_room_chars: usize,
) -> Result<Target, ChatError> {
    match kind {
        channel_type::UNSPECIFIED | channel_type::ROOM => {
            check_room_name(target, max_room_chars)?;
            Ok(Target::Room(ChannelId::Room(target.to_owned())))
        }
        channel_type::DIRECT_MESSAGE => {
            let other = Uuid::parse_str(target).map_err(|_| {
                ChatError::InvalidTarget("a direct chat's target is the other user's id".into())
            })?;
            if other == *me {
                return Err(ChatError::InvalidTarget(
                    "a direct chat needs another user; you cannot chat with yourself".into(),
                ));
            }
            let id = ChannelId::direct(&me.to_string(), &other.to_string());
            Ok(Target::Direct(id, other))
        }
        channel_type::GROUP => {
            let group = Uuid::parse_str(target).map_err(|_| {
                ChatError::InvalidTarget("a group chat's target is the group's id".into())
            })?;
            Ok(Target::Group(ChannelId::Group(group.to_string()), group))
        }
        other => Err(ChatError::InvalidTarget(format!(
            "unknown channel type {other}: use 1 (room), 2 (direct message) or 3 (group)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_must_be_a_json_object_within_the_cap() {
        assert!(check_content(r#"{"text":"hi","n":[1,{"a":null}]}"#, 100).is_ok());
        assert!(check_content("{}", 100).is_ok());
        for bad in [
            "",
            "[]",
            "\"text\"",
            "42",
            "{",
            "{\"a\":1} x",
            "null",
            "{\"a\":}",
        ] {
            assert!(
                matches!(check_content(bad, 100), Err(ChatError::ContentNotObject)),
                "{bad:?}"
            );
        }
        assert!(matches!(
            check_content(r#"{"text":"0123456789"}"#, 10),
            Err(ChatError::ContentTooLarge { max: 10 })
        ));
    }

    #[test]
    fn room_names() {
        assert!(check_room_name("lobby", 64).is_ok());
        assert!(
            check_room_name("été 2026", 8).is_ok(),
            "characters, not bytes"
        );
        assert!(check_room_name("a.b", 64).is_ok(), "dots are fine");
        for bad in ["", "a\nb", "\u{0}", "123456789"] {
            assert!(check_room_name(bad, 8).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn targets() {
        let me = Uuid::new_v4();
        let other = Uuid::new_v4();
        assert_eq!(
            target("lobby", 0, &me, 64),
            Ok(Target::Room(ChannelId::Room("lobby".into())))
        );
        let Ok(Target::Direct(id, who)) = target(&other.to_string(), 2, &me, 64) else {
            panic!("a direct chat")
        };
        assert_eq!(who, other);
        assert_eq!(id, ChannelId::direct(&other.to_string(), &me.to_string()));
        assert!(target(&me.to_string(), 2, &me, 64).is_err(), "not oneself");
        assert!(target("bob", 2, &me, 64).is_err(), "not a user id");
        assert!(target("g", 3, &me, 64).is_err(), "not a group id");
        assert_eq!(
            target(&other.to_string(), 3, &me, 64),
            Ok(Target::Group(ChannelId::Group(other.to_string()), other))
        );
        assert!(target("x", 9, &me, 64).is_err());
    }
}
