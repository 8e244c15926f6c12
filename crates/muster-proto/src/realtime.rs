//! The realtime envelope: one message per WebSocket frame, correlated by `cid`.
//!
//! The same Rust types carry both of Nakama's formats:
//! - JSON text frames, `{"cid":"1","ping":{}}`: the message kind is the one key beside `cid`;
//! - protobuf binary frames: the `Envelope` of Nakama's `rtapi/realtime.proto`, whose field
//!   numbers the `prost` attributes below repeat exactly.
//!
//! Decoding never panics and never trusts the input: a frame is rejected as [`DecodeError`] when it
//! is not an envelope, names a message kind this server does not know, or carries none.

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One realtime message and its correlation id (empty when the sender expects no answer).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Envelope {
    #[prost(string, tag = "1")]
    pub cid: String,
    #[prost(oneof = "Message", tags = "11, 32, 33")]
    pub message: Option<Message>,
}

/// The message kinds this server speaks; tags are Nakama's `Envelope` oneof numbers.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Message {
    #[prost(message, tag = "11")]
    Error(Error),
    #[prost(message, tag = "32")]
    Ping(Ping),
    #[prost(message, tag = "33")]
    Pong(Pong),
}

impl Message {
    /// The message's key in JSON and its name in logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Error(_) => "error",
            Message::Ping(_) => "ping",
            Message::Pong(_) => "pong",
        }
    }
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
                    "error" => Key::Known("error"),
                    "ping" => Key::Known("ping"),
                    "pong" => Key::Known("pong"),
                    other => Key::Unknown(other.chars().take(64).collect()),
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
                        Key::Known("error") => Message::Error(map.next_value()?),
                        Key::Known("ping") => {
                            Message::Ping(map.next_value::<Option<Ping>>()?.unwrap_or_default())
                        }
                        Key::Known("pong") => {
                            Message::Pong(map.next_value::<Option<Pong>>()?.unwrap_or_default())
                        }
                        Key::Known(other) => {
                            return Err(de::Error::custom(format!("unhandled key {other}")))
                        }
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
        match &self.message {
            Some(Message::Error(m)) => map.serialize_entry("error", m)?,
            Some(Message::Ping(m)) => map.serialize_entry("ping", m)?,
            Some(Message::Pong(m)) => map.serialize_entry("pong", m)?,
            None => {}
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        // A field this server does not know (tag 40) is not a message.
        assert!(matches!(
            decode_protobuf(&[0xC2, 0x02, 0x00]),
            Err(DecodeError::Unrecognized { .. })
        ));
    }

    proptest! {
        #[test]
        fn json_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_json(&bytes);
        }

        #[test]
        fn json_decoder_never_panics_on_json_like_text(text in r#"\{("(cid|ping|pong|error|x)":(\{\}|null|"[a-z0-9]{0,4}"|[0-9]{1,3}|\[\]),?){0,4}\}"#) {
            let _ = decode_json(text.as_bytes());
        }

        #[test]
        fn protobuf_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_protobuf(&bytes);
        }
    }
}
