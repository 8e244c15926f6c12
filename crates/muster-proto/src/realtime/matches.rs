//! Matches and the matchmaker (Nakama's `rtapi.Match*` and `rtapi.Matchmaker*`).

use std::collections::HashMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::presence::UserPresence;
use crate::wire::{base64_bytes, int64, is_false, is_zero_i32, is_zero_i64, nullable};

/// Server → client: a match just created or joined.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Match {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "matchId")]
    pub match_id: String,
    /// True when the server runs the match's logic; false for a relayed match.
    #[prost(bool, tag = "2")]
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub authoritative: bool,
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Members now.
    #[prost(int32, tag = "4")]
    #[serde(skip_serializing_if = "is_zero_i32", deserialize_with = "nullable")]
    pub size: i32,
    #[prost(message, repeated, tag = "5")]
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub presences: Vec<UserPresence>,
    /// The joining session's own presence.
    #[prost(message, optional, tag = "6")]
    #[serde(rename = "self", skip_serializing_if = "Option::is_none")]
    pub self_presence: Option<UserPresence>,
}

/// Client → server: create a relayed match (and join it).
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct MatchCreate {
    /// Optional name: creating with a name already in use joins that match instead.
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub name: String,
}

/// Server → client: data from a match member or from the match's own logic.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct MatchData {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "matchId")]
    pub match_id: String,
    /// The sender; absent when the match logic itself sent it.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence: Option<UserPresence>,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64", skip_serializing_if = "is_zero_i64")]
    #[serde(alias = "opCode")]
    pub op_code: i64,
    #[prost(bytes = "vec", tag = "4")]
    #[serde(with = "base64_bytes", skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<u8>,
    #[prost(bool, tag = "5")]
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub reliable: bool,
}

/// Client → server: data for the other members of a match (or for its logic).
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct MatchDataSend {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "matchId")]
    pub match_id: String,
    #[prost(int64, tag = "2")]
    #[serde(with = "int64", skip_serializing_if = "is_zero_i64")]
    #[serde(alias = "opCode")]
    pub op_code: i64,
    #[prost(bytes = "vec", tag = "3")]
    #[serde(with = "base64_bytes", skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<u8>,
    /// Deliver only to these members; everyone else in the match when empty.
    #[prost(message, repeated, tag = "4")]
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub presences: Vec<UserPresence>,
    #[prost(bool, tag = "5")]
    #[serde(skip_serializing_if = "is_false", deserialize_with = "nullable")]
    pub reliable: bool,
}

/// Client → server: join a match by its id or by a matchmaker token.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MatchJoin {
    #[prost(oneof = "match_join::Id", tags = "1, 2")]
    pub id: Option<match_join::Id>,
    /// Passed to the match handler's join check.
    #[prost(map = "string, string", tag = "3")]
    pub metadata: HashMap<String, String>,
}

pub mod match_join {
    /// What a [`MatchJoin`](super::MatchJoin) names: a match id or a matchmaker token.
    #[derive(Clone, PartialEq, Eq, prost::Oneof)]
    pub enum Id {
        #[prost(string, tag = "1")]
        MatchId(String),
        #[prost(string, tag = "2")]
        Token(String),
    }
}

/// The JSON form of [`MatchJoin`]: the oneof's members are plain keys.
#[derive(Default, Serialize, Deserialize)]
#[serde(default)]
struct MatchJoinJson {
    #[serde(skip_serializing_if = "Option::is_none", alias = "matchId")]
    match_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    #[serde(
        skip_serializing_if = "HashMap::is_empty",
        deserialize_with = "nullable"
    )]
    metadata: HashMap<String, String>,
}

impl Serialize for MatchJoin {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (match_id, token) = match &self.id {
            Some(match_join::Id::MatchId(id)) => (Some(id.clone()), None),
            Some(match_join::Id::Token(token)) => (None, Some(token.clone())),
            None => (None, None),
        };
        MatchJoinJson {
            match_id,
            token,
            metadata: self.metadata.clone(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for MatchJoin {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = MatchJoinJson::deserialize(deserializer)?;
        let id = match (json.match_id, json.token) {
            (Some(_), Some(_)) => {
                return Err(D::Error::custom(
                    "match_join takes a match_id or a token, not both",
                ))
            }
            (Some(id), None) => Some(match_join::Id::MatchId(id)),
            (None, Some(token)) => Some(match_join::Id::Token(token)),
            (None, None) => None,
        };
        Ok(MatchJoin {
            id,
            metadata: json.metadata,
        })
    }
}

/// Client → server: leave a match.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct MatchLeave {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "matchId")]
    pub match_id: String,
}

/// Server → client: members that joined or left a match.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct MatchPresenceEvent {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "matchId")]
    pub match_id: String,
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub joins: Vec<UserPresence>,
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    pub leaves: Vec<UserPresence>,
}

/// Client → server: look for opponents.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct MatchmakerAdd {
    #[prost(int32, tag = "1")]
    #[serde(skip_serializing_if = "is_zero_i32", deserialize_with = "nullable")]
    #[serde(alias = "minCount")]
    pub min_count: i32,
    #[prost(int32, tag = "2")]
    #[serde(skip_serializing_if = "is_zero_i32", deserialize_with = "nullable")]
    #[serde(alias = "maxCount")]
    pub max_count: i32,
    /// Which other tickets are acceptable (`*` for any).
    #[prost(string, tag = "3")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub query: String,
    #[prost(map = "string, string", tag = "4")]
    #[serde(
        skip_serializing_if = "HashMap::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "stringProperties")]
    pub string_properties: HashMap<String, String>,
    #[prost(map = "string, double", tag = "5")]
    #[serde(
        skip_serializing_if = "HashMap::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "numericProperties")]
    pub numeric_properties: HashMap<String, f64>,
}

/// Server → client: the players matched together, and how to join their match.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MatchmakerMatched {
    /// The ticket this result completes.
    #[prost(string, tag = "1")]
    pub ticket: String,
    #[prost(oneof = "matchmaker_matched::Id", tags = "2, 3")]
    pub id: Option<matchmaker_matched::Id>,
    #[prost(message, repeated, tag = "4")]
    pub users: Vec<MatchmakerUser>,
    /// The receiving player's own entry.
    #[prost(message, optional, tag = "5")]
    pub self_user: Option<MatchmakerUser>,
}

pub mod matchmaker_matched {
    /// Where a matched player goes: an existing match, or a token for `match_join`.
    #[derive(Clone, PartialEq, Eq, prost::Oneof)]
    pub enum Id {
        #[prost(string, tag = "2")]
        MatchId(String),
        #[prost(string, tag = "3")]
        Token(String),
    }
}

/// One matched player and the properties their ticket carried.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct MatchmakerUser {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence: Option<UserPresence>,
    #[prost(string, tag = "2")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "partyId")]
    pub party_id: String,
    #[prost(map = "string, string", tag = "5")]
    #[serde(
        skip_serializing_if = "HashMap::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "stringProperties")]
    pub string_properties: HashMap<String, String>,
    #[prost(map = "string, double", tag = "6")]
    #[serde(
        skip_serializing_if = "HashMap::is_empty",
        deserialize_with = "nullable"
    )]
    #[serde(alias = "numericProperties")]
    pub numeric_properties: HashMap<String, f64>,
}

/// The JSON form of [`MatchmakerMatched`].
#[derive(Default, Serialize, Deserialize)]
#[serde(default)]
struct MatchmakerMatchedJson {
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    ticket: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    match_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "nullable")]
    users: Vec<MatchmakerUser>,
    #[serde(rename = "self", skip_serializing_if = "Option::is_none")]
    self_user: Option<MatchmakerUser>,
}

impl Serialize for MatchmakerMatched {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (match_id, token) = match &self.id {
            Some(matchmaker_matched::Id::MatchId(id)) => (Some(id.clone()), None),
            Some(matchmaker_matched::Id::Token(token)) => (None, Some(token.clone())),
            None => (None, None),
        };
        MatchmakerMatchedJson {
            ticket: self.ticket.clone(),
            match_id,
            token,
            users: self.users.clone(),
            self_user: self.self_user.clone(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for MatchmakerMatched {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = MatchmakerMatchedJson::deserialize(deserializer)?;
        let id = match (json.match_id, json.token) {
            (Some(_), Some(_)) => {
                return Err(D::Error::custom(
                    "matchmaker_matched carries a match_id or a token, not both",
                ))
            }
            (Some(id), None) => Some(matchmaker_matched::Id::MatchId(id)),
            (None, Some(token)) => Some(matchmaker_matched::Id::Token(token)),
            (None, None) => None,
        };
        Ok(MatchmakerMatched {
            ticket: json.ticket,
            id,
            users: json.users,
            self_user: json.self_user,
        })
    }
}

/// Client → server: stop looking, by ticket.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct MatchmakerRemove {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub ticket: String,
}

/// Server → client: the ticket of a `matchmaker_add`, to cancel it or recognise its result.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct MatchmakerTicket {
    #[prost(string, tag = "1")]
    #[serde(
        skip_serializing_if = "String::is_empty",
        deserialize_with = "nullable"
    )]
    pub ticket: String,
}
