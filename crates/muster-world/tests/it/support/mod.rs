//! What the world's tests share: the real Helsinki extract and small maps built by hand.

use std::sync::{Arc, OnceLock};

use muster_world::geo::{Point, Projection};
use muster_world::map::{ImportStats, RoadMap};

/// Helsinki, imported once per test binary.
pub fn helsinki() -> Arc<RoadMap> {
    static MAP: OnceLock<Arc<RoadMap>> = OnceLock::new();
    MAP.get_or_init(|| {
        Arc::new(
            muster_world::map::osm::import(&muster_world::testdata::helsinki_extract())
                .expect("import Helsinki"),
        )
    })
    .clone()
}

/// A straight two-way road of `n` nodes `step` metres apart along x, with a building beside
/// each end: the map the tick tests reason about exactly.
pub fn straight_road(n: u32, step: f32, ms_per_edge: u32) -> Arc<RoadMap> {
    let nodes: Vec<Point> = (0..n).map(|i| Point::new(i as f32 * step, 0.0)).collect();
    let mut edges = Vec::new();
    for i in 0..n - 1 {
        edges.push((i, i + 1, ms_per_edge));
        edges.push((i + 1, i, ms_per_edge));
    }
    let end = (n - 1) as f32 * step;
    let buildings = vec![
        Point::new(0.0, 5.0),
        Point::new(end, 5.0),
        Point::new(end / 2.0, 30.0),
    ];
    Arc::new(RoadMap::build(
        Projection::new(60.0, 25.0),
        nodes,
        edges,
        buildings,
        ImportStats::default(),
    ))
}
