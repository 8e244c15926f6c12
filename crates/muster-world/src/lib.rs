//! A persistent spatial world for a location-based MMO (after TDWorld's tower defence on
//! real roads): players claim buildings as towers and connect them; creeps drive the real road
//! network between towers; towers shoot the creeps in range; a creep that arrives pays its owner.
//!
//! - [`geo`]: the plane in metres, boxes, the projection from degrees;
//! - [`map`]: the road graph and buildings, imported from OpenStreetMap; the bundled cities;
//! - [`routing`]: shortest paths (contraction hierarchies) and the bounded routing queue;
//! - [`routes`]: routes packed once into float arrays and shared by the creeps that drive them;
//! - [`actors`]: towers and creeps in packed columns;
//! - [`index`]: the creeps' grid and the towers' grid;
//! - [`shard`]: a region's state and its tick;
//! - [`seed`]: NPC towers and creeps per city, in proportion to population;
//! - [`aoi`]: areas of interest: a client's box, its snapshot and deltas, with hysteresis;
//! - [`testdata`]: the real map the tests and benches play on;
//! - [`checkpoint`]: snapshots written atomically while the shard keeps ticking, and restore.
//!
//! Usable alone: nothing here knows about sockets or databases; Muster's `world` domain drives
//! shards, persists actions and serves areas of interest.

pub mod actors;
pub mod aoi;
pub mod checkpoint;
pub mod geo;
pub mod index;
pub mod map;
pub mod routes;
pub mod routing;
pub mod seed;
pub mod shard;
pub mod testdata;

/// What can go wrong, each with a message fit for a player or an operator.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorldError {
    #[error("map import failed: {0}")]
    Import(String),
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    #[error("no building {0} in this shard")]
    UnknownBuilding(u32),
    #[error("building {building} is already claimed (by owner {owner})")]
    AlreadyClaimed { building: u32, owner: u32 },
    #[error("no tower {0} in this shard")]
    UnknownTower(u32),
    #[error("tower {0} is not yours")]
    NotYours(u32),
    #[error("the tower is at the highest level ({0})")]
    MaxLevel(u8),
    #[error("no route {0} in this shard")]
    UnknownRoute(u32),
    #[error("no road leads between these towers")]
    NoRoute,
    #[error("both towers stand on the same road node: there is nothing to drive")]
    SameRoad,
    #[error("a creep's speed must be above 0 and at most 100 m/s")]
    BadSpeed,
    #[error("count must be 1 to {0}")]
    BadCount(u32),
    #[error("bad area of interest: {0}")]
    BadBox(String),
    #[error("route {0} does not leave from a tower of yours")]
    RouteNotYours(u32),
    #[error("a player may hold at most {0} towers in a shard")]
    TooManyTowers(u32),
    #[error("a player may have at most {0} creeps on the road in a shard")]
    TooManyCreeps(u32),
}
