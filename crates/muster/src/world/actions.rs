//! Player actions — claim a building, upgrade a tower, connect two towers, spawn creeps — which
//! players call as server functions (`world_claim`, `world_upgrade`, `world_connect`,
//! `world_spawn`: `crate::functions::world`). Each is
//! applied on its shard's thread and logged to disk before it is acknowledged (see
//! [`super::log`]); a refused action changes nothing and logs nothing.

use muster_world::routing::{PathCalculator, Router};
use muster_world::shard::Shard;
use muster_world::WorldError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::payouts::Credit;
use crate::base::rpc::RpcCode;

/// Most creeps one `world_spawn` sends.
pub const MAX_SPAWN: u32 = 100;

/// An action as logged (and replayed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Action {
    Claim {
        building: u32,
    },
    Upgrade {
        tower: u32,
    },
    Connect {
        from: u32,
        to: u32,
    },
    Spawn {
        route: u32,
        count: u32,
        speed: f32,
    },
    /// Not a player's action: a credit the shard owes (an arrival's earnings), logged so that
    /// it is paid even if the server stops first. It changes nothing in the shard; a replay
    /// hands it to the payouts again (paid once: it is keyed).
    Credit(Credit),
}

impl Action {
    /// The ledger's reason for what the action costs.
    pub fn reason(&self) -> &'static str {
        match self {
            Action::Claim { .. } => "world_claim",
            Action::Upgrade { .. } => "world_upgrade",
            Action::Connect { .. } => "world_connect",
            Action::Spawn { .. } => "world_spawn",
            Action::Credit(_) => "world_credit",
        }
    }

    /// What the action costs player `user` in the world's currency, checking everything that
    /// would refuse it without changing anything (the shard is asked again when it is applied).
    pub fn cost(&self, shard: &Shard, user: u128) -> Result<u64, WorldError> {
        let rules = &shard.rules;
        let owner = shard.known_owner(user);
        match *self {
            Action::Claim { building } => {
                if shard.building_pos(building).is_none() {
                    return Err(WorldError::UnknownBuilding(building));
                }
                if let Some(t) = shard.tower_on(building) {
                    return Err(WorldError::AlreadyClaimed {
                        building,
                        owner: shard.towers.owner[t as usize],
                    });
                }
                let held = owner.map_or(0, |o| shard.towers_of(o).len());
                if held >= rules.max_towers_per_player as usize {
                    return Err(WorldError::TooManyTowers(rules.max_towers_per_player));
                }
                Ok(u64::from(rules.claim_cost))
            }
            Action::Upgrade { tower } => {
                let level = *shard
                    .towers
                    .level
                    .get(tower as usize)
                    .ok_or(WorldError::UnknownTower(tower))?;
                if Some(shard.towers.owner[tower as usize]) != owner {
                    return Err(WorldError::NotYours(tower));
                }
                if level >= rules.max_level {
                    return Err(WorldError::MaxLevel(rules.max_level));
                }
                Ok(u64::from(rules.upgrade_cost) * u64::from(level + 1))
            }
            Action::Connect { from, .. } => check_connect(shard, user, from).map(|()| 0),
            Action::Spawn {
                route,
                count,
                speed,
            } => {
                check_spawn(shard, owner, route, count, speed)?;
                let km = f64::from(shard.routes.length(route)) / 1000.0;
                let per_creep = match rules.spawn_cost_per_km {
                    0 => 0,
                    per_km => ((km * f64::from(per_km)).ceil() as u64).max(1),
                };
                Ok(per_creep * u64::from(count))
            }
            Action::Credit(_) => Ok(0),
        }
    }

    /// Applies the action for player `user` at the shard's current time; the answer for the
    /// caller, or why it was refused (the shard unchanged).
    pub fn apply(
        &self,
        shard: &mut Shard,
        router: &Router,
        calc: &mut PathCalculator,
        user: u128,
    ) -> Result<Value, WorldError> {
        match *self {
            Action::Claim { building } => {
                if shard.building_pos(building).is_none() {
                    return Err(WorldError::UnknownBuilding(building));
                }
                let owner = shard.owner_of(user);
                let tower = shard.claim(building, owner)?;
                let p = shard.towers.pos(tower);
                Ok(json!({"tower": tower, "x": p.x, "y": p.y}))
            }
            Action::Upgrade { tower } => {
                // A player who owns nothing yet is not numbered by a refusal.
                let owner = shard.known_owner(user).unwrap_or(0);
                Ok(json!({"tower": tower, "level": shard.upgrade(tower, owner)?}))
            }
            Action::Connect { from, to } => {
                check_connect(shard, user, from)?;
                let route = shard.connect(router, calc, from, to)?;
                Ok(json!({"route": route, "length_m": shard.routes.length(route)}))
            }
            Action::Spawn {
                route,
                count,
                speed,
            } => {
                check_spawn(shard, shard.known_owner(user), route, count, speed)?;
                let owner = shard.owner_of(user);
                let now = shard.now_ms;
                let mut creeps = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    let id = shard.spawn(owner, route, now, speed)?;
                    creeps.push(shard.creeps.public_id(id));
                }
                Ok(json!({"creeps": creeps}))
            }
            Action::Credit(_) => Ok(json!({})),
        }
    }
}

/// Whether player owner `owner` may send `count` creeps along `route` at `speed`: a route that
/// leaves from one of their towers, within their bound of creeps on the road.
fn check_spawn(
    shard: &Shard,
    owner: Option<u32>,
    route: u32,
    count: u32,
    speed: f32,
) -> Result<(), WorldError> {
    if !(1..=MAX_SPAWN).contains(&count) {
        return Err(WorldError::BadCount(MAX_SPAWN));
    }
    if route as usize >= shard.routes.len() {
        return Err(WorldError::UnknownRoute(route));
    }
    if !(speed.is_finite() && speed > 0.0 && speed <= 100.0) {
        return Err(WorldError::BadSpeed);
    }
    let Some(owner) = owner.filter(|&o| shard.route_leaves_from(route, o)) else {
        return Err(WorldError::RouteNotYours(route));
    };
    let max = shard.rules.max_creeps_per_player;
    if shard.creeps_of(owner).saturating_add(count) > max {
        return Err(WorldError::TooManyCreeps(max));
    }
    Ok(())
}

/// Whether player `user` may connect from tower `from` (theirs).
pub fn check_connect(shard: &Shard, user: u128, from: u32) -> Result<(), WorldError> {
    let owner = shard.known_owner(user);
    match shard.towers.owner.get(from as usize).copied() {
        None => Err(WorldError::UnknownTower(from)),
        Some(o) if Some(o) != owner => Err(WorldError::NotYours(from)),
        _ => Ok(()),
    }
}

/// A `Connect` whose route a routing worker computed (`nodes`; `None`: no road).
pub fn connect_routed(
    shard: &mut Shard,
    user: u128,
    from: u32,
    to: u32,
    nodes: Option<Vec<u32>>,
) -> Result<Value, WorldError> {
    check_connect(shard, user, from)?;
    let nodes = nodes.ok_or(WorldError::NoRoute)?;
    let route = shard.add_route_between(from, to, &nodes)?;
    Ok(json!({"route": route, "length_m": shard.routes.length(route)}))
}

/// The code a refusal is answered with.
pub fn code_of(error: &WorldError) -> RpcCode {
    match error {
        WorldError::UnknownBuilding(_)
        | WorldError::UnknownTower(_)
        | WorldError::UnknownRoute(_) => RpcCode::NotFound,
        WorldError::AlreadyClaimed { .. } => RpcCode::AlreadyExists,
        WorldError::NotYours(_) | WorldError::RouteNotYours(_) => RpcCode::PermissionDenied,
        WorldError::BadSpeed | WorldError::BadCount(_) | WorldError::BadBox(_) => {
            RpcCode::InvalidArgument
        }
        _ => RpcCode::FailedPrecondition,
    }
}
