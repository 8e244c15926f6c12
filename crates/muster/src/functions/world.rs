//! The persistent world's player actions as server functions: `world_claim`, `world_upgrade`,
//! `world_connect`, `world_spawn` (rules in [`crate::world::actions`]).

use std::sync::Arc;

use serde::Deserialize;

use super::{Call, Functions, RpcError, ServerFunction};
use crate::world::actions::Action;
use crate::world::World;

/// Registers the world's functions (a game's own function of the same id wins).
pub fn register(functions: &mut Functions, world: &Arc<World>) {
    for (id, kind) in [
        ("world_claim", Kind::Claim),
        ("world_upgrade", Kind::Upgrade),
        ("world_connect", Kind::Connect),
        ("world_spawn", Kind::Spawn),
    ] {
        if !functions.contains(id) {
            let _ = functions.register(
                id,
                WorldFunction {
                    world: world.clone(),
                    kind,
                },
            );
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Claim,
    Upgrade,
    Connect,
    Spawn,
}

struct WorldFunction {
    world: Arc<World>,
    kind: Kind,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Payload {
    #[serde(default)]
    shard: u32,
    building: Option<u32>,
    tower: Option<u32>,
    from: Option<u32>,
    to: Option<u32>,
    route: Option<u32>,
    count: Option<u32>,
    speed: Option<f32>,
}

#[async_trait::async_trait]
impl ServerFunction for WorldFunction {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let caller = call.caller.ok_or_else(|| {
            RpcError::invalid("world actions are a player's own: call with a session token.")
        })?;
        let p: Payload = call.json()?;
        let need = |v: Option<u32>, key: &str| {
            v.ok_or_else(|| RpcError::invalid(format!("The payload needs \"{key}\".")))
        };
        let action = match self.kind {
            Kind::Claim => Action::Claim {
                building: need(p.building, "building")?,
            },
            Kind::Upgrade => Action::Upgrade {
                tower: need(p.tower, "tower")?,
            },
            Kind::Connect => Action::Connect {
                from: need(p.from, "from")?,
                to: need(p.to, "to")?,
            },
            Kind::Spawn => Action::Spawn {
                route: need(p.route, "route")?,
                count: p.count.unwrap_or(1),
                speed: p.speed.unwrap_or(12.0),
            },
        };
        let answer = self.world.act(p.shard, caller.user_id, action).await?;
        Ok(answer.to_string())
    }
}
