//! Parties (Nakama's `rtapi.Party*`): a small group of players with a leader who stay together
//! between matches, exchange data and queue for matches as one.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::presence::UserPresence;
use crate::wire::{base64_bytes, int64, is_false, is_zero_i32, is_zero_i64, nullable};

/// Server → client: the party just created or joined.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Party {
    #[prost(string, tag = "1")]
    #[serde(alias = "partyId")]
    pub party_id: String,
    #[prost(bool, tag = "2")]
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub open: bool,
    #[prost(bool, tag = "3")]
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub hidden: bool,
    #[prost(int32, tag = "4")]
    #[serde(skip_serializing_if = "is_zero_i32", alias = "maxSize")]
    pub max_size: i32,
    #[prost(message, optional, tag = "5")]
    #[serde(rename = "self", skip_serializing_if = "Option::is_none")]
    pub self_presence: Option<UserPresence>,
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<UserPresence>,
    #[prost(message, repeated, tag = "7")]
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub presences: Vec<UserPresence>,
    #[prost(string, tag = "8")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub label: String,
}

/// Client → server: create a party, its creator the leader.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct PartyCreate {
    #[prost(bool, tag = "1")]
    #[serde(deserialize_with = "nullable")]
    pub open: bool,
    #[prost(int32, tag = "2")]
    #[serde(deserialize_with = "nullable", alias = "maxSize")]
    pub max_size: i32,
    #[prost(string, tag = "3")]
    #[serde(deserialize_with = "nullable")]
    pub label: String,
    #[prost(bool, tag = "4")]
    #[serde(deserialize_with = "nullable")]
    pub hidden: bool,
}

/// A request naming only a party: join, leave, close, list join requests.
macro_rules! party_request {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $name {
            #[prost(string, tag = "1")]
            #[serde(deserialize_with = "nullable", alias = "partyId")]
            pub party_id: String,
        }
    )*};
}

party_request!(
    /// Client → server: join an open party, or ask a closed one's leader to be let in.
    PartyJoin,
    /// Client → server: leave a party.
    PartyLeave,
    /// Client → server (the leader) and server → members: the party is closed.
    PartyClose,
    /// Client → server (the leader): the join requests waiting.
    PartyJoinRequestList,
);

/// A request naming a party and one presence in it: promote, accept, remove; and the
/// server's `party_leader`.
macro_rules! party_presence {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $name {
            #[prost(string, tag = "1")]
            #[serde(deserialize_with = "nullable", alias = "partyId")]
            pub party_id: String,
            #[prost(message, optional, tag = "2")]
            #[serde(skip_serializing_if = "Option::is_none")]
            pub presence: Option<UserPresence>,
        }
    )*};
}

party_presence!(
    /// Client → server (the leader): make a member the leader.
    PartyPromote,
    /// Server → members: the party's leader now.
    PartyLeader,
    /// Client → server (the leader): let a join request in.
    PartyAccept,
    /// Client → server (the leader): remove a member, or reject a join request.
    PartyRemove,
);

/// Server → the leader: users asking to join.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct PartyJoinRequest {
    #[prost(string, tag = "1")]
    #[serde(alias = "partyId")]
    pub party_id: String,
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub presences: Vec<UserPresence>,
}

/// Server → members: data a member sent.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct PartyData {
    #[prost(string, tag = "1")]
    #[serde(alias = "partyId")]
    pub party_id: String,
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence: Option<UserPresence>,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64", skip_serializing_if = "is_zero_i64", alias = "opCode")]
    pub op_code: i64,
    #[prost(bytes = "vec", tag = "4")]
    #[serde(with = "base64_bytes", skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<u8>,
}

/// Client → server: data for the other members.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct PartyDataSend {
    #[prost(string, tag = "1")]
    #[serde(deserialize_with = "nullable", alias = "partyId")]
    pub party_id: String,
    #[prost(int64, tag = "2")]
    #[serde(with = "int64", skip_serializing_if = "is_zero_i64", alias = "opCode")]
    pub op_code: i64,
    #[prost(bytes = "vec", tag = "3")]
    #[serde(with = "base64_bytes", skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<u8>,
}

/// Server → members: who joined and left.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct PartyPresenceEvent {
    #[prost(string, tag = "1")]
    #[serde(alias = "partyId")]
    pub party_id: String,
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub joins: Vec<UserPresence>,
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leaves: Vec<UserPresence>,
}

/// Client → server (the leader): change the label, openness and visibility.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct PartyUpdate {
    #[prost(string, tag = "1")]
    #[serde(deserialize_with = "nullable", alias = "partyId")]
    pub party_id: String,
    #[prost(string, tag = "2")]
    #[serde(deserialize_with = "nullable")]
    pub label: String,
    #[prost(bool, tag = "3")]
    #[serde(deserialize_with = "nullable")]
    pub open: bool,
    #[prost(bool, tag = "4")]
    #[serde(deserialize_with = "nullable")]
    pub hidden: bool,
}

/// Client → server (the leader): the party looks for a match as one.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct PartyMatchmakerAdd {
    #[prost(string, tag = "1")]
    #[serde(deserialize_with = "nullable", alias = "partyId")]
    pub party_id: String,
    #[prost(int32, tag = "2")]
    #[serde(deserialize_with = "nullable", alias = "minCount")]
    pub min_count: i32,
    #[prost(int32, tag = "3")]
    #[serde(deserialize_with = "nullable", alias = "maxCount")]
    pub max_count: i32,
    #[prost(string, tag = "4")]
    #[serde(deserialize_with = "nullable")]
    pub query: String,
    #[prost(map = "string, string", tag = "5")]
    #[serde(deserialize_with = "nullable", alias = "stringProperties")]
    pub string_properties: HashMap<String, String>,
    #[prost(map = "string, double", tag = "6")]
    #[serde(deserialize_with = "nullable", alias = "numericProperties")]
    pub numeric_properties: HashMap<String, f64>,
}

/// Client → server (the leader): stop looking, with this ticket.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct PartyMatchmakerRemove {
    #[prost(string, tag = "1")]
    #[serde(deserialize_with = "nullable", alias = "partyId")]
    pub party_id: String,
    #[prost(string, tag = "2")]
    #[serde(deserialize_with = "nullable")]
    pub ticket: String,
}

/// Server → members: the party's matchmaker ticket.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct PartyMatchmakerTicket {
    #[prost(string, tag = "1")]
    #[serde(alias = "partyId")]
    pub party_id: String,
    #[prost(string, tag = "2")]
    pub ticket: String,
}
