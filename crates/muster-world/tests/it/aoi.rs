//! Areas of interest on a road the test reasons about: a snapshot, then deltas; hysteresis at
//! the box's edge; changes of towers; panning; boxes refused.

use crate::support;

use muster_world::aoi::View;
use muster_world::geo::{Point, Rect};
use muster_world::routing::Router;
use muster_world::shard::{Rules, Shard};
use muster_world::WorldError;
use support::straight_road;

const ALICE: u32 = 1_000;

fn rect(x0: f32, x1: f32) -> Rect {
    Rect::from_corners(Point::new(x0, -100.0), Point::new(x1, 100.0))
}

#[test]
fn a_view_gets_a_snapshot_then_deltas_with_hysteresis_at_its_edge() {
    // A 1 km road; Alice's towers at both ends; one creep at 10 m/s from x = 0.
    let map = straight_road(11, 100.0, 10_000);
    let router = Router::prepare(&map);
    let mut calc = router.calculator();
    let rules = Rules {
        npc_respawn: false,
        ..Rules::default()
    };
    let mut shard = Shard::new(0, map, vec![Point::default()], rules);
    let home = shard.claim(0, ALICE).expect("claim");
    let shop = shard.claim(1, ALICE).expect("claim");
    let route = shard
        .connect(&router, &mut calc, home, shop)
        .expect("route");
    let creep = shard.spawn(ALICE, route, 0, 10.0).expect("spawn");
    let id = shard.creeps.public_id(creep);
    // The view: x in [0, 300] with 50 m of hysteresis.
    let mut view = View::new(rect(0.0, 300.0), 50.0, 2_000.0).expect("view");
    shard.tick(100);
    let first = view.update(&shard);
    assert!(first.snapshot);
    assert_eq!(
        first.towers.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![home]
    );
    assert_eq!(first.creeps.len(), 1);
    assert_eq!(first.creeps[0].id, id);
    // 20 s later: 200 m along, still in view; the tower unchanged is not sent again.
    for t in 2..=200 {
        shard.tick(t * 100);
    }
    let moved = view.update(&shard);
    assert!(!moved.snapshot);
    assert!(moved.towers.is_empty());
    assert_eq!(moved.creeps.len(), 1);
    assert!(
        (moved.creeps[0].pos.x - 200.0).abs() < 0.01,
        "{:?}",
        moved.creeps
    );
    // At 320 m it is past the box but within the margin: still in view, not gone.
    for t in 201..=320 {
        shard.tick(t * 100);
    }
    let edge = view.update(&shard);
    assert_eq!((edge.creeps.len(), edge.gone_creeps.len()), (1, 0));
    // At 360 m it is past the margin: gone, once.
    for t in 321..=360 {
        shard.tick(t * 100);
    }
    let left = view.update(&shard);
    assert_eq!(left.creeps.len(), 0);
    assert_eq!(left.gone_creeps, vec![id]);
    assert!(view.update(&shard).gone_creeps.is_empty());
    // A tower that changes is sent again.
    shard.upgrade(home, ALICE).expect("upgrade");
    let changed = view.update(&shard);
    assert_eq!(changed.towers.len(), 1);
    assert_eq!(changed.towers[0].level, 2);
    // Panning to the far end: a snapshot of the new box; the home tower is gone.
    view.move_to(rect(700.0, 1000.0), 2_000.0).expect("pan");
    let panned = view.update(&shard);
    assert!(panned.snapshot);
    assert_eq!(
        panned.towers.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![shop]
    );
    assert_eq!(panned.gone_towers, vec![home]);
    // The creep enters the new box near its end, then arrives and is gone.
    for t in 361..=800 {
        shard.tick(t * 100);
    }
    assert_eq!(view.update(&shard).creeps.len(), 1);
    for t in 801..=1_100 {
        shard.tick(t * 100);
    }
    assert_eq!(view.update(&shard).gone_creeps, vec![id]);
}

#[test]
fn boxes_too_large_or_not_boxes_are_refused() {
    let big = Rect::from_corners(Point::new(0.0, 0.0), Point::new(5_000.0, 10.0));
    assert!(
        matches!(View::new(big, 0.0, 2_000.0), Err(WorldError::BadBox(why)) if why.contains("larger than"))
    );
    let nan = Rect {
        min: Point::new(f32::NAN, 0.0),
        max: Point::new(1.0, 1.0),
    };
    assert!(matches!(
        View::new(nan, 0.0, 2_000.0),
        Err(WorldError::BadBox(_))
    ));
    let inverted = Rect {
        min: Point::new(10.0, 0.0),
        max: Point::new(0.0, 1.0),
    };
    assert!(matches!(
        View::new(inverted, 0.0, 2_000.0),
        Err(WorldError::BadBox(_))
    ));
    let mut view = View::new(rect(0.0, 10.0), 0.0, 2_000.0).expect("view");
    assert!(view.move_to(big, 2_000.0).is_err());
    assert_eq!(view.rect(), rect(0.0, 10.0));
}
