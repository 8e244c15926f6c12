//! `[world]`: the persistent spatial world (docs/world.md), off unless `map` names an extract.

use serde::{Deserialize, Serialize};

pub use muster_world::shard::Rules;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorldConfig {
    /// The OpenStreetMap extract (`.osm.pbf`) the world is played on; empty: no world.
    pub map: String,
    /// Shards, each ticking on its own thread.
    pub shards: usize,
    /// Copies of the map side by side in each shard (a small extract tiled to a large world).
    pub tiles_per_shard: usize,
    /// Where checkpoints are written (`shard-N.world`); empty: `<data_dir>/world`. A clustered
    /// world needs it set, to a volume every node mounts.
    pub checkpoint_dir: String,
    /// A clustered world: how long a node's lease on a shard lasts without a renewal (renewed
    /// every quarter of it). A killed node's shards resume elsewhere within about this long.
    pub lease_ms: u64,
    /// Seconds between two checkpoints of a shard; the last is written at shutdown.
    pub checkpoint_interval_s: u64,
    /// A shard with no checkpoint is seeded with this many NPC towers and twice as many creeps.
    pub seed_towers_per_shard: usize,
    /// Instead, when above 0: NPC towers per million inhabitants of the shard's city (shard N
    /// seeds the Nth city of the bundled list, in proportion to its population).
    pub seed_towers_per_million: f64,
    /// Area-of-interest updates sent to each subscriber per second (at most `rules.tick_hz`).
    pub aoi_hz: f32,
    /// Longest side of a subscribed box, metres.
    pub aoi_max_side_m: f32,
    /// Hysteresis at a box's edge: what is in view leaves it only this many metres outside.
    pub aoi_margin_m: f32,
    /// Players' new routes waiting to be computed at most; past it a connect is refused (busy).
    pub route_queue: usize,
    /// The currency actions are paid in (`rules.claim_cost`, `upgrade_cost`,
    /// `spawn_cost_per_km`) and a player's creep that arrives pays into its owner's wallet
    /// (`rules.reward_per_km` per kilometre driven).
    pub reward_currency: String,
    /// Actions (claim, upgrade, connect, spawn) one player may make per second, all shards
    /// together; 0 disables the limit.
    pub actions_per_sec: u32,
    /// How many actions a player may make at once after being quiet.
    pub action_burst: u32,
    /// Credits (arrivals' earnings, refunds) waiting for the database at most before shards
    /// refuse new spawns; what is already on the road still pays.
    pub max_waiting_credits: usize,
    /// How the world plays.
    pub rules: Rules,
}

impl Default for WorldConfig {
    fn default() -> Self {
        WorldConfig {
            map: String::new(),
            shards: 1,
            tiles_per_shard: 1,
            checkpoint_dir: String::new(),
            lease_ms: 5_000,
            checkpoint_interval_s: 30,
            seed_towers_per_shard: 0,
            seed_towers_per_million: 0.0,
            aoi_hz: 5.0,
            aoi_max_side_m: 2_000.0,
            aoi_margin_m: 50.0,
            route_queue: 1024,
            reward_currency: "coins".into(),
            actions_per_sec: 5,
            action_burst: 20,
            max_waiting_credits: 100_000,
            rules: Rules::default(),
        }
    }
}

impl WorldConfig {
    pub fn enabled(&self) -> bool {
        !self.map.is_empty()
    }

    pub fn validate(&self) -> Result<(), String> {
        if !self.enabled() {
            return Ok(());
        }
        if !(1..=1024).contains(&self.shards) || !(1..=100_000).contains(&self.tiles_per_shard) {
            return Err(
                "world.shards must be 1 to 1024 and world.tiles_per_shard 1 to 100000".into(),
            );
        }
        if !(self.seed_towers_per_million.is_finite() && self.seed_towers_per_million >= 0.0) {
            return Err("world.seed_towers_per_million must be 0 or more".into());
        }
        if self.route_queue == 0 || self.max_waiting_credits == 0 {
            return Err(
                "world.route_queue and world.max_waiting_credits must be at least 1".into(),
            );
        }
        if !(200..=600_000).contains(&self.lease_ms) {
            return Err("world.lease_ms must be 200 to 600000".into());
        }
        if self.checkpoint_interval_s == 0 {
            return Err("world.checkpoint_interval_s must be at least 1".into());
        }
        self.rules
            .validate()
            .map_err(|e| format!("world.rules: {e}"))
    }
}
