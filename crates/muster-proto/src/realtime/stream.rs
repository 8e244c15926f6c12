//! Streams (Nakama's `rtapi.Stream*`): what a server module sends to the sessions it placed on
//! a stream of its own (`nk.streamSend`), and who joined and left it. Server → client only.

use serde::{Deserialize, Serialize};

use super::UserPresence;
use crate::wire::{is_false, nullable};

/// A stream's address: its mode, and the subject, subcontext and label within it.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Stream {
    #[prost(int32, tag = "1")]
    #[serde(skip_serializing_if = "is_zero_i32", deserialize_with = "nullable")]
    pub mode: i32,
    #[prost(string, tag = "2")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub subject: String,
    #[prost(string, tag = "3")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub subcontext: String,
    #[prost(string, tag = "4")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub label: String,
}

fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

/// Data a module sent to a stream's sessions.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamData {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<Stream>,
    /// Who sent it; none for the server (a module's `streamSend`).
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<UserPresence>,
    #[prost(string, tag = "3")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub data: String,
    #[prost(bool, tag = "4")]
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub reliable: bool,
}

/// Sessions that joined or left a stream (hidden ones are not announced).
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamPresenceEvent {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<Stream>,
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub joins: Vec<UserPresence>,
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub leaves: Vec<UserPresence>,
}
