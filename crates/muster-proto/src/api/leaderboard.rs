//! Leaderboard records over REST, as Nakama's gateway renders them (`nakama.api` in
//! nakama-common's `api/api.proto`): `POST /v2/leaderboard/{id}` writes (its body is the
//! request's `record`, a `LeaderboardRecordWrite`), `GET /v2/leaderboard/{id}` and
//! `GET /v2/leaderboard/{id}/owner/{owner_id}` list, `DELETE /v2/leaderboard/{id}` deletes.
//!
//! As protojson does, 64-bit integers are JSON strings and fields at their zero value are left
//! out of answers; requests accept 64-bit integers as strings or numbers and the operator by
//! name or number.

use serde::{Deserialize, Deserializer, Serialize};

/// A 64-bit integer as protojson reads it: a JSON number or a string of one.
pub(crate) fn int64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int64 {
        Number(i64),
        Text(String),
    }
    match Int64::deserialize(deserializer)? {
        Int64::Number(n) => Ok(n),
        Int64::Text(text) => text.trim().parse().map_err(serde::de::Error::custom),
    }
}

/// The operator as protojson reads the `Operator` enum: its number or its name.
fn operator<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i32, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Enum {
        Number(i32),
        Name(String),
    }
    match Enum::deserialize(deserializer)? {
        Enum::Number(n) => Ok(n),
        Enum::Name(name) => match name.as_str() {
            "NO_OVERRIDE" => Ok(0),
            "BEST" => Ok(1),
            "SET" => Ok(2),
            "INCREMENT" => Ok(3),
            "DECREMENT" => Ok(4),
            other => Err(serde::de::Error::custom(format!(
                "unknown operator {other:?}"
            ))),
        },
    }
}

fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}

fn is_zero_i32(value: &i32) -> bool {
    *value == 0
}

fn as_string<S: serde::Serializer>(value: &i64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&value.to_string())
}

/// `POST /v2/leaderboard/{id}`'s body (`WriteLeaderboardRecordRequest.LeaderboardRecordWrite`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct LeaderboardRecordWrite {
    #[serde(deserialize_with = "int64")]
    pub score: i64,
    #[serde(deserialize_with = "int64")]
    pub subscore: i64,
    /// A JSON object, as a string; empty keeps the record's.
    pub metadata: String,
    /// 0 the leaderboard's own, 1 best, 2 set, 3 increment, 4 decrement.
    #[serde(deserialize_with = "operator")]
    pub operator: i32,
}

/// A leaderboard record (`LeaderboardRecord`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LeaderboardRecord {
    pub leaderboard_id: String,
    pub owner_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub username: String,
    #[serde(serialize_with = "as_string", deserialize_with = "int64")]
    pub score: i64,
    #[serde(
        serialize_with = "as_string",
        deserialize_with = "int64",
        skip_serializing_if = "is_zero_i64"
    )]
    pub subscore: i64,
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub num_score: i32,
    pub metadata: String,
    /// RFC 3339.
    pub create_time: String,
    pub update_time: String,
    /// When the record's period ends; absent for a leaderboard that never resets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiry_time: Option<String>,
    #[serde(
        serialize_with = "as_string",
        deserialize_with = "int64",
        skip_serializing_if = "is_zero_i64"
    )]
    pub rank: i64,
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub max_num_score: i32,
}

/// The answer to a listing (`LeaderboardRecordList`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct LeaderboardRecordList {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<LeaderboardRecord>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owner_records: Vec<LeaderboardRecord>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub next_cursor: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub prev_cursor: String,
    /// How many records the period holds.
    #[serde(
        serialize_with = "as_string",
        deserialize_with = "int64",
        skip_serializing_if = "is_zero_i64"
    )]
    pub rank_count: i64,
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero_u32(value: &u32) -> bool {
    *value == 0
}

/// A tournament as listed (`Tournament`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Tournament {
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub title: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub category: u32,
    /// 0 ascending, 1 descending.
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub sort_order: u32,
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub size: u32,
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub max_size: u32,
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub max_num_score: u32,
    #[serde(skip_serializing_if = "is_false")]
    pub can_enter: bool,
    /// Unix seconds.
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub end_active: u32,
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub next_reset: u32,
    pub metadata: String,
    /// RFC 3339.
    pub create_time: String,
    pub start_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub duration: u32,
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub start_active: u32,
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub prev_reset: u32,
    /// The `Operator` enum's number: 1 best, 2 set, 3 increment, 4 decrement.
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub operator: i32,
    #[serde(skip_serializing_if = "is_false")]
    pub authoritative: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub join_required: bool,
}

/// The answer to `GET /v2/tournament` (`TournamentList`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct TournamentList {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tournaments: Vec<Tournament>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cursor: String,
}
