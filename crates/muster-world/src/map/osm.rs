//! Import of an OpenStreetMap `.osm.pbf` extract (with the `osmpbf` crate) into a [`RoadMap`]:
//! the ways a car can drive (by their `highway` tag, honouring `oneway`), every node of those
//! ways as a graph node, each edge weighted by its travel time at the road class's speed; and
//! the ways tagged `building`, each kept as its centroid. Building relations (multipolygons)
//! are not read.
//!
//! Two passes over the file: the ways first (which nodes matter), then those nodes'
//! coordinates, so memory holds only what the map keeps.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use osmpbf::{Element, ElementReader};

use super::{ImportStats, RoadMap};
use crate::geo::{Point, Projection};
use crate::WorldError;

/// Speed by `highway` class, km/h; a class not listed is not drivable.
fn class_speed_kmh(highway: &str) -> Option<f32> {
    Some(match highway {
        "motorway" | "motorway_link" => 100.0,
        "trunk" | "trunk_link" => 80.0,
        "primary" | "primary_link" => 60.0,
        "secondary" | "secondary_link" => 50.0,
        "tertiary" | "tertiary_link" => 40.0,
        "unclassified" | "residential" => 30.0,
        "living_street" | "service" => 15.0,
        _ => return None,
    })
}

/// Which way a road may be driven.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Both,
    Forward,
    Backward,
}

struct Road {
    refs: Vec<i64>,
    kmh: f32,
    direction: Direction,
}

/// Reads `path` into a road map.
pub fn import(path: &Path) -> Result<RoadMap, WorldError> {
    let bad = |e: osmpbf::Error| WorldError::Import(format!("{}: {e}", path.display()));
    let mut stats = ImportStats::default();
    let mut roads: Vec<Road> = Vec::new();
    let mut buildings: Vec<Vec<i64>> = Vec::new();
    ElementReader::from_path(path)
        .map_err(bad)?
        .for_each(|element| match element {
            Element::Node(_) | Element::DenseNode(_) => stats.osm_nodes += 1,
            Element::Relation(_) => stats.osm_relations += 1,
            Element::Way(way) => {
                stats.osm_ways += 1;
                let mut highway = None;
                let mut oneway = None;
                let mut building = false;
                let mut roundabout = false;
                for (key, value) in way.tags() {
                    match key {
                        "highway" => highway = class_speed_kmh(value),
                        "oneway" => oneway = Some(value.to_owned()),
                        "junction" => roundabout = value == "roundabout",
                        "building" => building = value != "no",
                        _ => {}
                    }
                }
                let refs: Vec<i64> = way.refs().collect();
                if refs.len() < 2 {
                    return;
                }
                if let Some(kmh) = highway {
                    let direction = match oneway.as_deref() {
                        Some("yes" | "true" | "1") => Direction::Forward,
                        Some("-1" | "reverse") => Direction::Backward,
                        Some("no" | "false" | "0") => Direction::Both,
                        _ if roundabout => Direction::Forward,
                        _ => Direction::Both,
                    };
                    stats.road_ways += 1;
                    roads.push(Road {
                        refs,
                        kmh,
                        direction,
                    });
                } else if building {
                    stats.building_ways += 1;
                    buildings.push(refs);
                }
            }
        })
        .map_err(bad)?;
    let wanted: HashSet<i64> = roads
        .iter()
        .flat_map(|r| r.refs.iter())
        .chain(buildings.iter().flatten())
        .copied()
        .collect();
    let mut coords: HashMap<i64, (f64, f64)> = HashMap::with_capacity(wanted.len());
    ElementReader::from_path(path)
        .map_err(bad)?
        .for_each(|element| {
            let (id, lat, lon) = match element {
                Element::Node(n) => (n.id(), n.lat(), n.lon()),
                Element::DenseNode(n) => (n.id(), n.lat(), n.lon()),
                _ => return,
            };
            if wanted.contains(&id) {
                coords.insert(id, (lat, lon));
            }
        })
        .map_err(bad)?;
    if roads.is_empty() {
        return Err(WorldError::Import(format!(
            "{}: no drivable road in the extract",
            path.display()
        )));
    }
    // The projection's origin: the middle of the road nodes' extent.
    let (mut lat_min, mut lat_max, mut lon_min, mut lon_max) = (90f64, -90f64, 180f64, -180f64);
    for id in roads.iter().flat_map(|r| r.refs.iter()) {
        if let Some(&(lat, lon)) = coords.get(id) {
            lat_min = lat_min.min(lat);
            lat_max = lat_max.max(lat);
            lon_min = lon_min.min(lon);
            lon_max = lon_max.max(lon);
        }
    }
    let projection = Projection::new((lat_min + lat_max) / 2.0, (lon_min + lon_max) / 2.0);
    let mut compact: HashMap<i64, u32> = HashMap::new();
    let mut nodes: Vec<Point> = Vec::new();
    let mut edges: Vec<(u32, u32, u32)> = Vec::new();
    for road in &roads {
        let mps = road.kmh / 3.6;
        let mut previous: Option<(u32, Point)> = None;
        for id in &road.refs {
            // A way whose node is missing from the extract (cut at its border) is broken there.
            let Some(&(lat, lon)) = coords.get(id) else {
                previous = None;
                continue;
            };
            let n = *compact.entry(*id).or_insert_with(|| {
                nodes.push(projection.to_plane(lat, lon));
                nodes.len() as u32 - 1
            });
            let here = nodes[n as usize];
            if let Some((p, at)) = previous {
                if p != n {
                    let ms = ((at.distance(here) / mps) * 1000.0).round().max(1.0) as u32;
                    if road.direction != Direction::Backward {
                        edges.push((p, n, ms));
                    }
                    if road.direction != Direction::Forward {
                        edges.push((n, p, ms));
                    }
                }
            }
            previous = Some((n, here));
        }
    }
    let building_positions: Vec<Point> = buildings
        .iter()
        .filter_map(|refs| {
            // A closed way repeats its first node last: count it once.
            let ring = if refs.len() > 2 && refs.first() == refs.last() {
                &refs[..refs.len() - 1]
            } else {
                &refs[..]
            };
            let points: Vec<(f64, f64)> = ring
                .iter()
                .filter_map(|id| coords.get(id))
                .copied()
                .collect();
            if points.is_empty() {
                return None;
            }
            let k = points.len() as f64;
            let lat = points.iter().map(|p| p.0).sum::<f64>() / k;
            let lon = points.iter().map(|p| p.1).sum::<f64>() / k;
            Some(projection.to_plane(lat, lon))
        })
        .collect();
    Ok(RoadMap::build(
        projection,
        nodes,
        edges,
        building_positions,
        stats,
    ))
}
