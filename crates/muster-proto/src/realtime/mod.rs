//! The realtime envelope: one message per WebSocket frame, correlated by `cid`.
//!
//! The same Rust types carry both of Nakama's formats:
//! - JSON text frames, `{"cid":"1","ping":{}}`: the message kind is the one key beside `cid`;
//! - protobuf binary frames: the `Envelope` of Nakama's `rtapi/realtime.proto`, whose field
//!   numbers the `prost` attributes below repeat exactly.
//!
//! Decoding never panics and never trusts the input: a frame is rejected as [`DecodeError`] when it
//! is not an envelope, names a message kind this server does not know, or carries none.

pub mod channel;
pub mod delivery;
pub mod matches;
pub mod notification;
pub mod party;
pub mod presence;
pub mod rpc;
pub mod status;
pub mod stream;
pub mod world;

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use channel::{
    channel_type, Channel, ChannelId, ChannelJoin, ChannelLeave, ChannelMessage, ChannelMessageAck,
    ChannelMessageRemove, ChannelMessageSend, ChannelMessageUpdate, ChannelPresenceEvent,
};
pub use matches::{
    match_join, matchmaker_matched, Match, MatchCreate, MatchData, MatchDataSend, MatchJoin,
    MatchLeave, MatchPresenceEvent, MatchmakerAdd, MatchmakerMatched, MatchmakerRemove,
    MatchmakerTicket, MatchmakerUser,
};
pub use notification::{Notification, Notifications};
pub use party::{
    Party, PartyAccept, PartyClose, PartyCreate, PartyData, PartyDataSend, PartyJoin,
    PartyJoinRequest, PartyJoinRequestList, PartyLeader, PartyLeave, PartyMatchmakerAdd,
    PartyMatchmakerRemove, PartyMatchmakerTicket, PartyPresenceEvent, PartyPromote, PartyRemove,
    PartyUpdate,
};
pub use presence::UserPresence;
pub use rpc::Rpc;
pub use status::{Status, StatusFollow, StatusPresenceEvent, StatusUnfollow, StatusUpdate};
pub use stream::{Stream, StreamData, StreamPresenceEvent};
pub use world::{WorldCreep, WorldState, WorldSubscribe, WorldTower, WorldUnsubscribe};

/// One realtime message and its correlation id (empty when the sender expects no answer).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Envelope {
    #[prost(string, tag = "1")]
    pub cid: String,
    #[prost(
        oneof = "Message",
        tags = "2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 100, 101, 102"
    )]
    pub message: Option<Message>,
}

/// The message kinds this server speaks; tags are Nakama's `Envelope` oneof numbers.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Message {
    #[prost(message, tag = "2")]
    Channel(Channel),
    #[prost(message, tag = "3")]
    ChannelJoin(ChannelJoin),
    #[prost(message, tag = "4")]
    ChannelLeave(ChannelLeave),
    #[prost(message, tag = "5")]
    ChannelMessage(ChannelMessage),
    #[prost(message, tag = "6")]
    ChannelMessageAck(ChannelMessageAck),
    #[prost(message, tag = "7")]
    ChannelMessageSend(ChannelMessageSend),
    #[prost(message, tag = "8")]
    ChannelMessageUpdate(ChannelMessageUpdate),
    #[prost(message, tag = "9")]
    ChannelMessageRemove(ChannelMessageRemove),
    #[prost(message, tag = "10")]
    ChannelPresenceEvent(ChannelPresenceEvent),
    #[prost(message, tag = "11")]
    Error(Error),
    #[prost(message, tag = "12")]
    Match(Match),
    #[prost(message, tag = "13")]
    MatchCreate(MatchCreate),
    #[prost(message, tag = "14")]
    MatchData(MatchData),
    #[prost(message, tag = "15")]
    MatchDataSend(MatchDataSend),
    #[prost(message, tag = "16")]
    MatchJoin(MatchJoin),
    #[prost(message, tag = "17")]
    MatchLeave(MatchLeave),
    #[prost(message, tag = "18")]
    MatchPresenceEvent(MatchPresenceEvent),
    #[prost(message, tag = "19")]
    MatchmakerAdd(MatchmakerAdd),
    #[prost(message, tag = "20")]
    MatchmakerMatched(MatchmakerMatched),
    #[prost(message, tag = "21")]
    MatchmakerRemove(MatchmakerRemove),
    #[prost(message, tag = "22")]
    MatchmakerTicket(MatchmakerTicket),
    #[prost(message, tag = "23")]
    Notifications(Notifications),
    #[prost(message, tag = "24")]
    Rpc(Rpc),
    #[prost(message, tag = "25")]
    Status(Status),
    #[prost(message, tag = "26")]
    StatusFollow(StatusFollow),
    #[prost(message, tag = "27")]
    StatusPresenceEvent(StatusPresenceEvent),
    #[prost(message, tag = "28")]
    StatusUnfollow(StatusUnfollow),
    #[prost(message, tag = "29")]
    StatusUpdate(StatusUpdate),
    #[prost(message, tag = "30")]
    StreamData(StreamData),
    #[prost(message, tag = "31")]
    StreamPresenceEvent(StreamPresenceEvent),
    #[prost(message, tag = "32")]
    Ping(Ping),
    #[prost(message, tag = "33")]
    Pong(Pong),
    #[prost(message, tag = "34")]
    Party(Party),
    #[prost(message, tag = "35")]
    PartyCreate(PartyCreate),
    #[prost(message, tag = "36")]
    PartyJoin(PartyJoin),
    #[prost(message, tag = "37")]
    PartyLeave(PartyLeave),
    #[prost(message, tag = "38")]
    PartyPromote(PartyPromote),
    #[prost(message, tag = "39")]
    PartyLeader(PartyLeader),
    #[prost(message, tag = "40")]
    PartyAccept(PartyAccept),
    #[prost(message, tag = "41")]
    PartyRemove(PartyRemove),
    #[prost(message, tag = "42")]
    PartyClose(PartyClose),
    #[prost(message, tag = "43")]
    PartyJoinRequestList(PartyJoinRequestList),
    #[prost(message, tag = "44")]
    PartyJoinRequest(PartyJoinRequest),
    #[prost(message, tag = "45")]
    PartyMatchmakerAdd(PartyMatchmakerAdd),
    #[prost(message, tag = "46")]
    PartyMatchmakerRemove(PartyMatchmakerRemove),
    #[prost(message, tag = "47")]
    PartyMatchmakerTicket(PartyMatchmakerTicket),
    #[prost(message, tag = "48")]
    PartyData(PartyData),
    #[prost(message, tag = "49")]
    PartyDataSend(PartyDataSend),
    #[prost(message, tag = "50")]
    PartyPresenceEvent(PartyPresenceEvent),
    #[prost(message, tag = "51")]
    PartyUpdate(PartyUpdate),
    /// Muster's own (docs/world.md).
    #[prost(message, tag = "100")]
    WorldSubscribe(WorldSubscribe),
    #[prost(message, tag = "101")]
    WorldUnsubscribe(WorldUnsubscribe),
    #[prost(message, tag = "102")]
    WorldState(WorldState),
}

/// The one table of message kinds and their JSON keys; it generates [`Message::kind`], the
/// JSON key lookup, and both directions of the JSON codec, so adding a kind is one line here
/// plus its variant above.
macro_rules! message_kinds {
    ($($variant:ident = $key:literal),* $(,)?) => {
        impl Message {
            /// The message's key in JSON and its name in logs and metrics.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Message::$variant(_) => $key,)*
                }
            }

            /// Every JSON key, in tag order.
            pub const KINDS: &'static [&'static str] = &[$($key),*];
        }

        fn known_kind(key: &str) -> Option<&'static str> {
            match key {
                $($key => Some($key),)*
                _ => None,
            }
        }

        /// Reads the value of the envelope key `kind` (one of the table's keys); `null` is the
        /// message's default, as protobuf JSON has it.
        fn read_message<'de, A: MapAccess<'de>>(
            kind: &'static str,
            map: &mut A,
        ) -> Result<Message, A::Error> {
            match kind {
                $($key => Ok(Message::$variant(map.next_value::<Option<_>>()?.unwrap_or_default())),)*
                other => Err(de::Error::custom(format!("unhandled key {other}"))),
            }
        }

        fn write_message<S: SerializeMap>(message: &Message, map: &mut S) -> Result<(), S::Error> {
            match message {
                $(Message::$variant(m) => map.serialize_entry($key, m),)*
            }
        }
    };
}

message_kinds! {
    Channel = "channel",
    ChannelJoin = "channel_join",
    ChannelLeave = "channel_leave",
    ChannelMessage = "channel_message",
    ChannelMessageAck = "channel_message_ack",
    ChannelMessageSend = "channel_message_send",
    ChannelMessageUpdate = "channel_message_update",
    ChannelMessageRemove = "channel_message_remove",
    ChannelPresenceEvent = "channel_presence_event",
    Error = "error",
    Match = "match",
    MatchCreate = "match_create",
    MatchData = "match_data",
    MatchDataSend = "match_data_send",
    MatchJoin = "match_join",
    MatchLeave = "match_leave",
    MatchPresenceEvent = "match_presence_event",
    MatchmakerAdd = "matchmaker_add",
    MatchmakerMatched = "matchmaker_matched",
    MatchmakerRemove = "matchmaker_remove",
    MatchmakerTicket = "matchmaker_ticket",
    Notifications = "notifications",
    Rpc = "rpc",
    Status = "status",
    StatusFollow = "status_follow",
    StatusPresenceEvent = "status_presence_event",
    StatusUnfollow = "status_unfollow",
    StatusUpdate = "status_update",
    StreamData = "stream_data",
    StreamPresenceEvent = "stream_presence_event",
    Ping = "ping",
    Pong = "pong",
    Party = "party",
    PartyCreate = "party_create",
    PartyJoin = "party_join",
    PartyLeave = "party_leave",
    PartyPromote = "party_promote",
    PartyLeader = "party_leader",
    PartyAccept = "party_accept",
    PartyRemove = "party_remove",
    PartyClose = "party_close",
    PartyJoinRequestList = "party_join_request_list",
    PartyJoinRequest = "party_join_request",
    PartyMatchmakerAdd = "party_matchmaker_add",
    PartyMatchmakerRemove = "party_matchmaker_remove",
    PartyMatchmakerTicket = "party_matchmaker_ticket",
    PartyData = "party_data",
    PartyDataSend = "party_data_send",
    PartyPresenceEvent = "party_presence_event",
    PartyUpdate = "party_update",
    WorldSubscribe = "world_subscribe",
    WorldUnsubscribe = "world_unsubscribe",
    WorldState = "world_state",
}

/// Application-level heartbeat.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
pub struct Ping {}

/// Answer to [`Ping`].
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
pub struct Pong {}

/// A problem with a message the client sent; the connection stays open.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Error {
    /// One of [`error_code`].
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(map = "string, string", tag = "3")]
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub context: HashMap<String, String>,
}

/// Nakama's realtime error codes (`rtapi.Error.Code`).
pub mod error_code {
    pub const RUNTIME_EXCEPTION: i32 = 0;
    pub const UNRECOGNIZED_PAYLOAD: i32 = 1;
    pub const MISSING_PAYLOAD: i32 = 2;
    pub const BAD_INPUT: i32 = 3;
    pub const MATCH_NOT_FOUND: i32 = 4;
    pub const MATCH_JOIN_REJECTED: i32 = 5;
    pub const RUNTIME_FUNCTION_NOT_FOUND: i32 = 6;
    pub const RUNTIME_FUNCTION_EXCEPTION: i32 = 7;
}

impl Envelope {
    pub fn new(cid: impl Into<String>, message: Message) -> Self {
        Envelope {
            cid: cid.into(),
            message: Some(message),
        }
    }

    /// An error envelope answering the message with correlation id `cid`.
    pub fn error(cid: impl Into<String>, code: i32, message: impl Into<String>) -> Self {
        Envelope::new(
            cid,
            Message::Error(Error {
                code,
                message: message.into(),
                context: HashMap::new(),
            }),
        )
    }
}

/// Why a frame could not be turned into an [`Envelope`]. Each maps to one realtime error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("malformed envelope: {0}")]
    Malformed(String),
    #[error("unrecognized message kind '{kind}'")]
    Unrecognized { cid: String, kind: String },
    #[error("envelope carries no message")]
    Missing { cid: String },
    #[error("envelope carries more than one message")]
    Ambiguous { cid: String },
}

impl DecodeError {
    /// The realtime error code to answer with.
    pub fn code(&self) -> i32 {
        match self {
            DecodeError::Malformed(_) | DecodeError::Ambiguous { .. } => error_code::BAD_INPUT,
            DecodeError::Unrecognized { .. } => error_code::UNRECOGNIZED_PAYLOAD,
            DecodeError::Missing { .. } => error_code::MISSING_PAYLOAD,
        }
    }

    /// The correlation id of the offending frame, when it could be read.
    pub fn cid(&self) -> &str {
        match self {
            DecodeError::Malformed(_) => "",
            DecodeError::Unrecognized { cid, .. }
            | DecodeError::Missing { cid }
            | DecodeError::Ambiguous { cid } => cid,
        }
    }
}

/// Decodes a JSON text frame.
pub fn decode_json(frame: &[u8]) -> Result<Envelope, DecodeError> {
    let raw: RawEnvelope =
        serde_json::from_slice(frame).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    match (raw.messages, raw.unknown_kind) {
        (0, Some(kind)) => Err(DecodeError::Unrecognized { cid: raw.cid, kind }),
        (0, None) => Err(DecodeError::Missing { cid: raw.cid }),
        (1, None) => Ok(Envelope {
            cid: raw.cid,
            message: raw.message,
        }),
        (_, Some(kind)) if raw.messages == 1 => {
            Err(DecodeError::Unrecognized { cid: raw.cid, kind })
        }
        _ => Err(DecodeError::Ambiguous { cid: raw.cid }),
    }
}

/// Encodes a JSON text frame.
pub fn encode_json(envelope: &Envelope) -> String {
    // Serializing our own types into a String cannot fail.
    serde_json::to_string(envelope).unwrap_or_default()
}

/// Decodes a protobuf binary frame.
pub fn decode_protobuf(frame: &[u8]) -> Result<Envelope, DecodeError> {
    let envelope = <Envelope as prost::Message>::decode(frame)
        .map_err(|e| DecodeError::Malformed(e.to_string()))?;
    if envelope.message.is_none() {
        // Protobuf skips fields it does not know, so "unknown kind" and "no kind" look alike here.
        return Err(DecodeError::Unrecognized {
            cid: envelope.cid,
            kind: "unknown protobuf field".to_string(),
        });
    }
    Ok(envelope)
}

/// Encodes a protobuf binary frame.
pub fn encode_protobuf(envelope: &Envelope) -> Vec<u8> {
    prost::Message::encode_to_vec(envelope)
}

/// What the JSON visitor saw: at most one known message, and the last unknown key if any.
struct RawEnvelope {
    cid: String,
    message: Option<Message>,
    messages: usize,
    unknown_kind: Option<String>,
}

/// The keys an envelope object may hold, read without allocating for the known ones.
enum Key {
    Cid,
    Known(&'static str),
    Unknown(String),
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an envelope key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "cid" => Key::Cid,
                    // Nakama decodes with protojson, which takes the lowerCamelCase JSON name
                    // (`channelJoin`) as well as the proto name (`channel_join`).
                    other => match known_kind(other).or_else(|| known_kind(&snake_case(other)?)) {
                        Some(kind) => Key::Known(kind),
                        None => Key::Unknown(other.chars().take(64).collect()),
                    },
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for RawEnvelope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EnvelopeVisitor;
        impl<'de> Visitor<'de> for EnvelopeVisitor {
            type Value = RawEnvelope;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object with a \"cid\" and one message")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEnvelope, A::Error> {
                let mut raw = RawEnvelope {
                    cid: String::new(),
                    message: None,
                    messages: 0,
                    unknown_kind: None,
                };
                while let Some(key) = map.next_key::<Key>()? {
                    let message = match key {
                        Key::Cid => {
                            raw.cid = map.next_value::<Cid>()?.0;
                            continue;
                        }
                        Key::Unknown(kind) => {
                            map.next_value::<IgnoredAny>()?;
                            raw.unknown_kind = Some(kind);
                            continue;
                        }
                        Key::Known(kind) => read_message(kind, &mut map)?,
                    };
                    raw.messages += 1;
                    raw.message = Some(message);
                }
                Ok(raw)
            }
        }
        deserializer.deserialize_map(EnvelopeVisitor)
    }
}

/// `channelJoin` → `channel_join`; `None` for a key with no capital (nothing to convert) or one
/// too long to be a message kind.
fn snake_case(camel: &str) -> Option<String> {
    if camel.len() > 64 || !camel.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut snake = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    Some(snake)
}

/// A correlation id: Nakama clients send a string; a number is accepted and kept as its text.
struct Cid(String);

impl<'de> Deserialize<'de> for Cid {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Number(i64),
        }
        Ok(Cid(match Either::deserialize(deserializer)? {
            Either::Text(text) => text,
            Either::Number(n) => n.to_string(),
        }))
    }
}

impl Serialize for Envelope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if !self.cid.is_empty() {
            map.serialize_entry("cid", &self.cid)?;
        }
        if let Some(message) = &self.message {
            write_message(message, &mut map)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key of a JSON value in lowerCamelCase, as protojson writes it (user data such as
    /// `metadata` values is left alone by using keys without underscores in the samples).
    fn camel_keys(value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let mut parts = k.split('_');
                        let mut camel = parts.next().unwrap_or_default().to_owned();
                        for part in parts {
                            let mut chars = part.chars();
                            camel.extend(chars.next().map(|c| c.to_ascii_uppercase()));
                            camel.push_str(chars.as_str());
                        }
                        (camel, camel_keys(v))
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(camel_keys).collect()),
            other => other.clone(),
        }
    }

    #[test]
    fn camel_case_envelopes_decode_as_their_proto_names_do() {
        // Every message a client sends in Nakama's rtapi/realtime.proto (nakama-common), with
        // every field the proto gives it set under its proto name; the camelCase twin of each
        // is what protojson also accepts. (MatchCreate's `name` is Muster's own.)
        let samples = [
            r#"{"cid":"1","channel_join":{"target":"lobby","type":1,"persistence":true,"hidden":false}}"#,
            r#"{"cid":"2","channel_leave":{"channel_id":"2...lobby"}}"#,
            r#"{"cid":"3","channel_message_send":{"channel_id":"2...lobby","content":"{}"}}"#,
            r#"{"cid":"4","channel_message_update":{"channel_id":"2...lobby","message_id":"m","content":"{}"}}"#,
            r#"{"cid":"5","channel_message_remove":{"channel_id":"2...lobby","message_id":"m"}}"#,
            r#"{"cid":"6","match_create":{"name":"duel"}}"#,
            r#"{"cid":"7","match_join":{"match_id":"abc.","metadata":{"team":"red"}}}"#,
            r#"{"cid":"8","match_join":{"token":"t"}}"#,
            r#"{"cid":"9","match_leave":{"match_id":"abc."}}"#,
            r#"{"match_data_send":{"match_id":"abc.","op_code":3,"data":"AQI=","presences":[{"user_id":"u","session_id":"s","username":"n","persistence":true}],"reliable":true}}"#,
            r#"{"cid":"10","matchmaker_add":{"min_count":2,"max_count":4,"query":"*","string_properties":{"region":"eu"},"numeric_properties":{"rank":7}}}"#,
            r#"{"cid":"11","matchmaker_remove":{"ticket":"t"}}"#,
            r#"{"cid":"12","rpc":{"id":"wallet_spend","payload":"{}","http_key":"k"}}"#,
            r#"{"cid":"13","ping":{}}"#,
        ];
        for sample in samples {
            let snake: serde_json::Value = serde_json::from_str(sample).expect("sample");
            let camel = camel_keys(&snake).to_string();
            let from_snake = decode_json(sample.as_bytes()).expect(sample);
            let from_camel =
                decode_json(camel.as_bytes()).unwrap_or_else(|e| panic!("{camel}: {e}"));
            assert_eq!(from_snake, from_camel, "{camel}");
        }
        // A camelCase key that names no kind is still unrecognized, not taken for another.
        assert!(matches!(
            decode_json(br#"{"cid":"1","channelJoinNot":{}}"#),
            Err(DecodeError::Unrecognized { .. })
        ));
    }
    use proptest::prelude::*;

    #[test]
    fn json_ping_round_trip_keeps_cid() {
        let envelope = decode_json(br#"{"cid":"7","ping":{}}"#).expect("valid ping");
        assert_eq!(envelope.cid, "7");
        assert!(matches!(envelope.message, Some(Message::Ping(_))));
        let pong = Envelope::new("7", Message::Pong(Pong {}));
        assert_eq!(encode_json(&pong), r#"{"cid":"7","pong":{}}"#);
    }

    #[test]
    fn json_numeric_cid_and_null_body_are_accepted() {
        let envelope = decode_json(br#"{"ping":null,"cid":12}"#).expect("valid ping");
        assert_eq!(envelope.cid, "12");
    }

    #[test]
    fn json_errors_are_classified() {
        assert!(matches!(decode_json(b"{"), Err(DecodeError::Malformed(_))));
        assert!(matches!(
            decode_json(b"[1]"),
            Err(DecodeError::Malformed(_))
        ));
        assert_eq!(
            decode_json(br#"{"cid":"1","fly":{}}"#),
            Err(DecodeError::Unrecognized {
                cid: "1".into(),
                kind: "fly".into()
            })
        );
        assert_eq!(
            decode_json(br#"{"cid":"2"}"#),
            Err(DecodeError::Missing { cid: "2".into() })
        );
        assert_eq!(
            decode_json(br#"{"cid":"3","ping":{},"pong":{}}"#),
            Err(DecodeError::Ambiguous { cid: "3".into() })
        );
        assert_eq!(
            decode_json(br#"{"cid":"4","fly":{}}"#).unwrap_err().code(),
            error_code::UNRECOGNIZED_PAYLOAD
        );
    }

    #[test]
    fn protobuf_round_trip() {
        let envelope = Envelope::error("9", error_code::BAD_INPUT, "nope");
        let bytes = encode_protobuf(&envelope);
        assert_eq!(decode_protobuf(&bytes).expect("decodes"), envelope);
        // A field this server does not know (tag 99) is not a message.
        assert!(matches!(
            decode_protobuf(&[0x9A, 0x06, 0x00]),
            Err(DecodeError::Unrecognized { .. })
        ));
    }

    /// The JSON nakama-js 2.8 writes for each request, decoded and re-encoded unchanged in meaning.
    #[test]
    fn nakama_js_requests_decode() {
        let join = decode_json(
            br#"{"channel_join":{"target":"lobby","type":1,"persistence":true,"hidden":false},"cid":"2"}"#,
        )
        .expect("channel_join");
        let Some(Message::ChannelJoin(j)) = &join.message else {
            panic!("not a join")
        };
        assert_eq!(
            (j.target.as_str(), j.r#type, j.persistence, j.hidden),
            ("lobby", channel_type::ROOM, Some(true), Some(false))
        );
        let data = decode_json(
            br#"{"match_data_send":{"match_id":"m.","op_code":"7","data":"aGk=","presences":[]}}"#,
        )
        .expect("match_data_send");
        let Some(Message::MatchDataSend(d)) = &data.message else {
            panic!("not match data")
        };
        assert_eq!(
            (d.op_code, d.data.as_slice(), d.reliable),
            (7, &b"hi"[..], false)
        );
        let join = decode_json(br#"{"cid":"3","match_join":{"token":"t"}}"#).expect("by token");
        assert!(matches!(
            join.message,
            Some(Message::MatchJoin(MatchJoin { id: Some(match_join::Id::Token(ref t)), .. })) if t == "t"
        ));
        assert!(matches!(
            decode_json(br#"{"match_join":{"token":"t","match_id":"m"}}"#),
            Err(DecodeError::Malformed(_))
        ));
        let add = decode_json(
            br#"{"cid":"4","matchmaker_add":{"min_count":2,"max_count":2,"query":"*","string_properties":null}}"#,
        )
        .expect("matchmaker_add with a null map");
        assert!(matches!(add.message, Some(Message::MatchmakerAdd(ref a)) if a.max_count == 2));
        let rpc =
            decode_json(br#"{"cid":"5","rpc":{"id":"wallet_spend","payload":"{}"}}"#).expect("rpc");
        assert_eq!(rpc.message.as_ref().map(Message::kind), Some("rpc"));
        assert!(decode_json(br#"{"cid":"6","match_create":{}}"#).is_ok());
    }

    #[test]
    fn server_messages_use_protobuf_json_conventions() {
        let data = Envelope::new(
            "",
            Message::MatchData(MatchData {
                match_id: "m".into(),
                presence: None,
                op_code: 3,
                data: b"hi".to_vec(),
                reliable: true,
            }),
        );
        assert_eq!(
            encode_json(&data),
            r#"{"match_data":{"match_id":"m","op_code":"3","data":"aGk=","reliable":true}}"#
        );
        let matched = Envelope::new(
            "",
            Message::MatchmakerMatched(MatchmakerMatched {
                ticket: "t".into(),
                id: Some(matchmaker_matched::Id::Token("tok".into())),
                users: vec![],
                self_user: Some(MatchmakerUser::default()),
            }),
        );
        assert_eq!(
            encode_json(&matched),
            r#"{"matchmaker_matched":{"ticket":"t","token":"tok","self":{}}}"#
        );
        let message = Envelope::new(
            "",
            Message::ChannelMessage(ChannelMessage {
                channel_id: "2...lobby".into(),
                code: Some(0),
                create_time: Some(crate::wire::Timestamp::from_unix_ms(0)),
                persistent: Some(false),
                ..Default::default()
            }),
        );
        assert_eq!(
            encode_json(&message),
            r#"{"channel_message":{"channel_id":"2...lobby","code":0,"create_time":"1970-01-01T00:00:00Z","persistent":false}}"#
        );
        // An empty answer (to channel_leave, match_leave, matchmaker_remove) is just the cid.
        assert_eq!(
            encode_json(&Envelope {
                cid: "9".into(),
                message: None
            }),
            r#"{"cid":"9"}"#
        );
    }

    #[test]
    fn every_kind_round_trips_in_both_formats() {
        for kind in Message::KINDS {
            let text = format!(r#"{{"cid":"1","{kind}":{{}}}}"#);
            let envelope = decode_json(text.as_bytes()).expect(kind);
            assert_eq!(envelope.message.as_ref().map(Message::kind), Some(*kind));
            assert_eq!(
                decode_json(encode_json(&envelope).as_bytes()),
                Ok(envelope.clone())
            );
            assert_eq!(decode_protobuf(&encode_protobuf(&envelope)), Ok(envelope));
        }
    }

    proptest! {
        #[test]
        fn json_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_json(&bytes);
        }

        #[test]
        fn json_decoder_never_panics_on_json_like_text(text in r#"\{("(cid|ping|pong|error|x|channel_join|match_data_send|match_join|matchmaker_add|rpc)":(\{\}|null|"[a-z0-9]{0,4}"|[0-9]{1,3}|\[\]),?){0,4}\}"#) {
            let _ = decode_json(text.as_bytes());
        }

        #[test]
        fn protobuf_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_protobuf(&bytes);
        }
    }
}
