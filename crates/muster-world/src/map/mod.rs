//! The map a world is played on: a compact road graph (nodes on the plane, directed edges with
//! travel times) and the buildings players claim as towers, each snapped to the road node its
//! creeps leave from.
//!
//! - [`osm`]: import from an OpenStreetMap `.osm.pbf` extract;
//! - [`cities`]: the bundled list of city centres and populations that seeding uses.

pub mod cities;
pub mod osm;

use rstar::primitives::GeomWithData;
use rstar::RTree;

use crate::geo::{Point, Projection, Rect};

/// A building: where it stands and the road node nearest to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Building {
    pub pos: Point,
    pub road_node: u32,
}

/// A directed road edge: its head node and its travel time in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub to: u32,
    pub ms: u32,
}

/// What an import read and kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportStats {
    /// Elements in the file.
    pub osm_nodes: u64,
    pub osm_ways: u64,
    pub osm_relations: u64,
    /// Ways kept as drivable roads, and as buildings.
    pub road_ways: u64,
    pub building_ways: u64,
}

/// A road network and its buildings, on one projection.
#[derive(Debug, Clone)]
pub struct RoadMap {
    pub projection: Projection,
    /// Road nodes on the plane, by compact id.
    pub nodes: Vec<Point>,
    /// Out-edges of node `n`: `edges[first_edge[n]..first_edge[n + 1]]`.
    pub first_edge: Vec<u32>,
    pub edges: Vec<Edge>,
    pub buildings: Vec<Building>,
    /// The box holding every road node and building.
    pub bounds: Rect,
    pub stats: ImportStats,
}

impl RoadMap {
    /// A map from road nodes, directed edges `(from, to, ms)` and building positions; each
    /// building is snapped to the nearest node of the largest connected part of the network
    /// (so that a route from any building to any other exists, bar one-way traps).
    pub fn build(
        projection: Projection,
        nodes: Vec<Point>,
        mut edges: Vec<(u32, u32, u32)>,
        building_positions: Vec<Point>,
        stats: ImportStats,
    ) -> RoadMap {
        edges.sort_unstable();
        edges.dedup_by_key(|e| (e.0, e.1));
        let mut first_edge = vec![0u32; nodes.len() + 1];
        for &(from, _, _) in &edges {
            first_edge[from as usize + 1] += 1;
        }
        for i in 1..first_edge.len() {
            first_edge[i] += first_edge[i - 1];
        }
        let main = largest_component(nodes.len(), &edges);
        let edges: Vec<Edge> = edges.iter().map(|&(_, to, ms)| Edge { to, ms }).collect();
        let snappable: RTree<GeomWithData<[f32; 2], u32>> = RTree::bulk_load(
            (0..nodes.len() as u32)
                .filter(|&n| main[n as usize])
                .map(|n| GeomWithData::new([nodes[n as usize].x, nodes[n as usize].y], n))
                .collect(),
        );
        let buildings: Vec<Building> = building_positions
            .into_iter()
            .filter_map(|pos| {
                snappable
                    .nearest_neighbor(&[pos.x, pos.y])
                    .map(|n| Building {
                        pos,
                        road_node: n.data,
                    })
            })
            .collect();
        let mut bounds = Rect::from_corners(Point::default(), Point::default());
        if let Some(first) = nodes.first().or(buildings.first().map(|b| &b.pos)) {
            bounds = Rect::from_corners(*first, *first);
        }
        for p in nodes.iter().chain(buildings.iter().map(|b| &b.pos)) {
            bounds = bounds.union(&Rect::from_corners(*p, *p));
        }
        RoadMap {
            projection,
            nodes,
            first_edge,
            edges,
            buildings,
            bounds,
            stats,
        }
    }

    /// The out-edges of `node`.
    pub fn edges_from(&self, node: u32) -> &[Edge] {
        let n = node as usize;
        &self.edges[self.first_edge[n] as usize..self.first_edge[n + 1] as usize]
    }

    /// Whether a road leads directly from `a` to `b`.
    pub fn connected(&self, a: u32, b: u32) -> bool {
        self.edges_from(a).iter().any(|e| e.to == b)
    }
}

/// Which nodes belong to the largest weakly connected part of the graph (union-find).
fn largest_component(n: usize, edges: &[(u32, u32, u32)]) -> Vec<bool> {
    let mut parent: Vec<u32> = (0..n as u32).collect();
    fn find(parent: &mut [u32], mut x: u32) -> u32 {
        while parent[x as usize] != x {
            let up = parent[parent[x as usize] as usize];
            parent[x as usize] = up;
            x = up;
        }
        x
    }
    for &(a, b, _) in edges {
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra != rb {
            parent[ra as usize] = rb;
        }
    }
    let mut size = vec![0u32; n];
    for x in 0..n as u32 {
        let r = find(&mut parent, x);
        size[r as usize] += 1;
    }
    let Some(biggest) = (0..n).max_by_key(|&r| size[r]) else {
        return Vec::new();
    };
    (0..n as u32)
        .map(|x| find(&mut parent, x) as usize == biggest)
        .collect()
}
