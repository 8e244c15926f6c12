//! The tick with time in the test's hands: creeps move along their routes at their speed,
//! cross cells, arrive and pay; towers shoot what is in range; bad actions are refused.

use crate::support;

use muster_world::routing::Router;
use muster_world::shard::{Rules, Shard};
use muster_world::WorldError;
use support::straight_road;

/// Player owners (outside the NPC range, so no respawn).
const ALICE: u32 = 1_000;
const BOB: u32 = 1_001;

fn rules() -> Rules {
    Rules {
        tick_hz: 10.0,
        attack_hz: 10.0,
        cell_m: 100.0,
        range_m: 40.0,
        damage: 25,
        creep_hp: 100,
        reward_per_km: 10,
        ..Rules::default()
    }
}

/// A shard on a 1 km straight road (11 nodes 100 m apart) where Alice has claimed the
/// buildings at both ends and connected them; returns it, its router and the route.
fn alices_road() -> (Shard, Router, u32) {
    let map = straight_road(11, 100.0, 10_000);
    let router = Router::prepare(&map);
    let mut calc = router.calculator();
    let mut shard = Shard::new(0, map, vec![Default::default()], rules());
    let home = shard.claim(0, ALICE).expect("claim");
    let shop = shard.claim(1, ALICE).expect("claim");
    let route = shard
        .connect(&router, &mut calc, home, shop)
        .expect("route");
    (shard, router, route)
}

#[test]
fn a_creep_drives_its_route_and_pays_its_owner_on_arrival() {
    let (mut shard, _router, route) = alices_road();
    assert_eq!(shard.routes.length(route), 1000.0);
    let creep = shard.spawn(ALICE, route, 0, 10.0).expect("spawn");
    // After 25 s at 10 m/s: 250 m along the road, in the third cell.
    for t in 1..=250 {
        let r = shard.tick(t * 100);
        assert!(r.arrivals.is_empty());
    }
    let p = shard.creep_pos(creep).expect("alive");
    assert!((p.x - 250.0).abs() < 0.01 && p.y.abs() < 0.01, "{p:?}");
    // It arrives at 100 s, once, and pays 10 per km.
    let mut paid = Vec::new();
    let mut crossed = 0;
    for t in 251..=1_010 {
        let r = shard.tick(t * 100);
        crossed += r.crossed;
        paid.extend(r.arrivals.iter().map(|a| (a.owner, a.reward)));
    }
    assert_eq!(paid, vec![(ALICE, 10)]);
    assert_eq!(shard.creep_pos(creep), None);
    assert_eq!(shard.creeps.alive(), 0);
    // Cells of 100 m: it crossed into cells 3 to 9 after the check (or 10: the last node
    // lies on a boundary), each crossing counted once.
    assert!((7..=8).contains(&crossed), "{crossed} crossings");
}

#[test]
fn towers_shoot_enemy_creeps_in_range_until_they_die() {
    let (mut shard, _router, route) = alices_road();
    // Bob's tower stands 30 m off the middle of the road (building 2 at x = 500, y = 30).
    let guard = shard.claim(2, BOB).expect("claim");
    // Bob's creep set off 6 s ago: 60 m down the road, past Alice's tower at home.
    shard.tick(6_000);
    let friend = shard.spawn(BOB, route, 0, 10.0).expect("spawn");
    let mine = shard.spawn(ALICE, route, 6_000, 10.0).expect("spawn");
    let mut shots = 0;
    let mut kills = 0;
    let mut t = 6_000;
    while shard.creep_pos(mine).is_some() {
        t += 100;
        let r = shard.tick(t);
        shots += r.shots;
        kills += r.kills;
        if r.shots > 0 {
            // Only within range: 40 m of (500, 30) means x in [473.5, 526.5] on the road.
            let x = shard.creep_pos(mine).map(|p| p.x).unwrap_or(500.0);
            assert!((470.0..=530.0).contains(&x), "shot at x = {x}");
        }
        assert!(t < 200_000);
    }
    // 100 hp, 25 per shot: four shots, one kill; Bob's own creep is left alone.
    assert_eq!((shots, kills), (4, 1));
    assert!(shard.creep_pos(friend).is_some());
    let _ = guard;
}

#[test]
fn bad_actions_are_refused_with_clear_errors() {
    let map = straight_road(11, 100.0, 10_000);
    let router = Router::prepare(&map);
    let mut calc = router.calculator();
    let mut shard = Shard::new(0, map, vec![Default::default()], rules());
    let t = shard.claim(0, ALICE).expect("claim");
    assert_eq!(
        shard.claim(0, BOB),
        Err(WorldError::AlreadyClaimed {
            building: 0,
            owner: ALICE
        })
    );
    assert_eq!(shard.claim(99, BOB), Err(WorldError::UnknownBuilding(99)));
    assert_eq!(shard.upgrade(t, BOB), Err(WorldError::NotYours(t)));
    assert_eq!(shard.upgrade(7, ALICE), Err(WorldError::UnknownTower(7)));
    assert_eq!(shard.upgrade(t, ALICE), Ok(2));
    assert_eq!(
        shard.connect(&router, &mut calc, t, 42),
        Err(WorldError::UnknownTower(42))
    );
    assert_eq!(
        shard.spawn(ALICE, 0, 0, 10.0),
        Err(WorldError::UnknownRoute(0))
    );
    let other = shard.claim(1, ALICE).expect("claim");
    let route = shard.connect(&router, &mut calc, t, other).expect("route");
    assert_eq!(
        shard.spawn(ALICE, route, 0, f32::NAN),
        Err(WorldError::BadSpeed)
    );
    assert_eq!(
        shard.spawn(ALICE, route, 0, -1.0),
        Err(WorldError::BadSpeed)
    );
    // Nothing was changed by the refusals.
    assert_eq!((shard.towers.len(), shard.creeps.alive()), (2, 0));
    assert!(Rules {
        tick_hz: 0.0,
        ..Rules::default()
    }
    .validate()
    .is_err());
    assert!(Rules {
        attack_hz: 20.0,
        ..Rules::default()
    }
    .validate()
    .is_err());
}
