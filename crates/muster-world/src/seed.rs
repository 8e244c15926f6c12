//! Seeding: NPC towers and creeps for a city, in seconds.
//!
//! Towers go on buildings drawn at random with a Gaussian preference for the city centre
//! (weighted sampling without replacement, Efraimidis–Spirakis: each building gets the key
//! `E / w` with `E` exponential and `w` its weight; the smallest keys win: one pass and a
//! partial sort). Connections join a random tower to another within `link_m`, routed on the
//! road graph; creeps are spread over the connections, already under way.

use rand::Rng;

use crate::actors::NPC_OWNERS;
use crate::geo::Point;
use crate::map::cities::City;
use crate::routing::Router;
use crate::shard::Shard;

/// How much to seed.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedPlan {
    pub towers: usize,
    pub connections: usize,
    pub creeps: usize,
    /// Where the city centre is on the shard's plane, and the spread (σ) of towers around it.
    pub centre: Point,
    pub spread_m: f32,
    /// The farthest a seeded connection reaches, metres.
    pub link_m: f32,
    /// Creep speeds are drawn from this range, m/s.
    pub speed: (f32, f32),
}

impl SeedPlan {
    /// A plan for `city` at `per_million` towers per million inhabitants, two creeps per
    /// tower and one connection per eight towers, centred on the shard's area.
    pub fn for_city(shard: &Shard, city: &City, towers_per_million: f64) -> SeedPlan {
        let towers = (city.population as f64 / 1e6 * towers_per_million).round() as usize;
        let area = shard.area();
        SeedPlan {
            towers,
            connections: towers.div_ceil(8),
            creeps: towers * 2,
            centre: Point::new(
                (area.min.x + area.max.x) / 2.0,
                (area.min.y + area.max.y) / 2.0,
            ),
            spread_m: area.width().min(area.height()) / 4.0,
            link_m: 2_000.0,
            speed: (8.0, 14.0),
        }
    }
}

/// What seeding made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeedReport {
    pub towers: usize,
    pub routes: usize,
    pub creeps: usize,
    /// Connections for which no road route existed.
    pub unroutable: usize,
}

/// Seeds `shard` per `plan` at time `now_ms`.
pub fn seed(
    shard: &mut Shard,
    router: &Router,
    plan: &SeedPlan,
    now_ms: u64,
    rng: &mut impl Rng,
) -> SeedReport {
    let mut report = SeedReport::default();
    shard.now_ms = shard.now_ms.max(now_ms);
    // Towers: weighted sampling without replacement.
    let two_s2 = 2.0 * plan.spread_m.max(1.0).powi(2);
    let mut keyed: Vec<(f32, u32)> = (0..shard.building_count())
        .filter(|&b| shard.tower_on(b).is_none())
        .filter_map(|b| {
            let p = shard.building_pos(b)?;
            let w = (-p.distance2(plan.centre) / two_s2).exp() + 1e-6;
            let e: f32 = -(1.0 - rng.random::<f32>()).ln();
            Some((e / w, b))
        })
        .collect();
    let take = plan.towers.min(keyed.len());
    if take < keyed.len() && take > 0 {
        keyed.select_nth_unstable_by(take - 1, |a, b| a.0.total_cmp(&b.0));
    }
    let before = shard.towers.len();
    let npc = |rng: &mut dyn rand::RngCore| rng.random_range(NPC_OWNERS);
    let claims: Vec<(u32, u32, u8)> = keyed[..take]
        .iter()
        .map(|&(_, b)| (b, npc(rng), rng.random_range(1..=3)))
        .collect();
    shard.claim_bulk(claims.into_iter());
    report.towers = shard.towers.len() - before;
    if shard.towers.len() < 2 {
        return report;
    }
    // Connections, each routed on the road graph.
    let mut calc = router.calculator();
    let mut routes: Vec<(u32, u32)> = Vec::new(); // (route, owner)
    let mut near: Vec<u32> = Vec::new();
    for _ in 0..plan.connections {
        let from = rng.random_range(0..shard.towers.len() as u32);
        near.clear();
        let tile = shard.tile_of_tower(from);
        shard.towers_within(shard.towers.pos(from), plan.link_m, |t| {
            if near.len() < 64
                && shard.tile_of_tower(t) == tile
                && shard.route_ends(from, t).is_ok()
            {
                near.push(t);
            }
        });
        if near.is_empty() {
            report.unroutable += 1;
            continue;
        }
        let to = near[rng.random_range(0..near.len())];
        match shard.connect(router, &mut calc, from, to) {
            Ok(r) => routes.push((r, shard.towers.owner[from as usize])),
            Err(_) => report.unroutable += 1,
        }
    }
    report.routes = shard.routes.len();
    if routes.is_empty() {
        return report;
    }
    // Creeps, already somewhere along their routes; numbered route by route, so that a tick
    // reads each route's points while they are in cache.
    let mut picks: Vec<(u32, u32)> = (0..plan.creeps)
        .map(|_| routes[rng.random_range(0..routes.len())])
        .collect();
    picks.sort_unstable();
    for (route, owner) in picks {
        let speed = rng.random_range(plan.speed.0..=plan.speed.1);
        let trip_ms = (shard.routes.length(route) / speed * 1000.0) as u64;
        let start = now_ms.saturating_sub(rng.random_range(0..trip_ms.max(1)));
        if shard.spawn(owner, route, start, speed).is_ok() {
            report.creeps += 1;
        }
    }
    report
}
