//! Muster's own messages for the persistent world (docs/world.md): a client subscribes to an
//! area of interest — a box on a shard's plane, in metres — and receives `world_state`: a
//! snapshot, then changes at the world's update rate. Envelope tags 100 and up, outside
//! Nakama's.

use serde::{Deserialize, Serialize};

/// Subscribe to a box of a shard, or move the box already subscribed (a new snapshot follows).
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct WorldSubscribe {
    #[prost(uint32, tag = "1")]
    pub shard: u32,
    #[prost(float, tag = "2")]
    pub min_x: f32,
    #[prost(float, tag = "3")]
    pub min_y: f32,
    #[prost(float, tag = "4")]
    pub max_x: f32,
    #[prost(float, tag = "5")]
    pub max_y: f32,
}

/// Stop receiving `world_state`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
pub struct WorldUnsubscribe {}

/// A tower as a client sees it.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct WorldTower {
    #[prost(uint32, tag = "1")]
    pub id: u32,
    #[prost(float, tag = "2")]
    pub x: f32,
    #[prost(float, tag = "3")]
    pub y: f32,
    #[prost(uint32, tag = "4")]
    pub owner: u32,
    #[prost(uint32, tag = "5")]
    pub level: u32,
}

/// A creep as a client sees it; `id` is never reused (below 2^53, exact in JSON numbers).
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct WorldCreep {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(float, tag = "2")]
    pub x: f32,
    #[prost(float, tag = "3")]
    pub y: f32,
    #[prost(uint32, tag = "4")]
    pub owner: u32,
}

/// What a subscriber sees: the whole box (`snapshot`) or what changed since the last state it
/// was sent — every creep in view with its position, towers that entered or changed, and the
/// ids that left the view.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct WorldState {
    #[prost(uint32, tag = "1")]
    pub shard: u32,
    /// The shard's tick and its world time (ms) this state is of.
    #[prost(uint64, tag = "2")]
    pub tick: u64,
    #[prost(uint64, tag = "3")]
    pub time_ms: u64,
    #[prost(bool, tag = "4")]
    pub snapshot: bool,
    #[prost(message, repeated, tag = "5")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub towers: Vec<WorldTower>,
    #[prost(message, repeated, tag = "6")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub creeps: Vec<WorldCreep>,
    #[prost(uint64, repeated, tag = "7")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gone_creeps: Vec<u64>,
    #[prost(uint32, repeated, tag = "8")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gone_towers: Vec<u32>,
    /// When the tick this state is of began, Unix ms on the server's clock (a client's update
    /// latency is its receipt time less this).
    #[prost(uint64, tag = "9")]
    pub tick_unix_ms: u64,
}
