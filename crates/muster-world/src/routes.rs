//! Routes stored once and shared by every creep that drives them: one packed `f32` array of
//! `(x, y, metres from the start)` triples for all routes, and each route's first triple
//! (TDWorld's saving: a route as a float array, not an object per step).
//!
//! A creep's position is derived from its route and the distance it has driven; a cursor it
//! keeps (the segment it was on) makes that O(1) per tick as it only moves forward.

use std::collections::HashMap;

use crate::geo::Point;
use crate::map::RoadMap;

/// Every route of a shard.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouteStore {
    /// Route `r`'s triples are `points[3 * starts[r] .. 3 * starts[r + 1]]`.
    pub(crate) starts: Vec<u32>,
    /// `x, y, metres from the start`, three floats per point.
    pub(crate) points: Vec<f32>,
    /// Routes by their end nodes, so that two connections between the same roads share one.
    by_ends: HashMap<(u32, u32), u32>,
}

impl RouteStore {
    pub fn new() -> RouteStore {
        RouteStore {
            starts: vec![0],
            points: Vec::new(),
            by_ends: HashMap::new(),
        }
    }

    /// The store from its packed arrays (a checkpoint's), rebuilding the lookup by ends.
    pub(crate) fn from_parts(
        starts: Vec<u32>,
        points: Vec<f32>,
        ends: &[(u32, u32)],
    ) -> RouteStore {
        let by_ends = ends
            .iter()
            .enumerate()
            .map(|(r, e)| (*e, r as u32))
            .collect();
        RouteStore {
            starts,
            points,
            by_ends,
        }
    }

    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The route already stored between these road nodes.
    pub fn find(&self, from: u32, to: u32) -> Option<u32> {
        self.by_ends.get(&(from, to)).copied()
    }

    /// Each route's end nodes, by route id (for checkpoints).
    pub(crate) fn ends(&self) -> Vec<(u32, u32)> {
        let mut ends = vec![(0, 0); self.len()];
        for (e, r) in &self.by_ends {
            ends[*r as usize] = *e;
        }
        ends
    }

    /// Stores the route along `nodes` of `map` (shifted by `offset`) under `ends` (the road
    /// nodes it joins, as the shard numbers them) and returns its id; an existing route between
    /// the same ends is returned instead.
    pub fn add(&mut self, map: &RoadMap, nodes: &[u32], offset: Point, ends: (u32, u32)) -> u32 {
        if let Some(r) = self.find(ends.0, ends.1) {
            return r;
        }
        let mut along = 0f32;
        let mut last: Option<Point> = None;
        for &n in nodes {
            let p = map.nodes[n as usize];
            let p = Point::new(p.x + offset.x, p.y + offset.y);
            if let Some(l) = last {
                along += l.distance(p);
            }
            self.points.extend_from_slice(&[p.x, p.y, along]);
            last = Some(p);
        }
        self.starts.push((self.points.len() / 3) as u32);
        let id = self.len() as u32 - 1;
        self.by_ends.insert(ends, id);
        id
    }

    /// The route's length in metres.
    pub fn length(&self, route: u32) -> f32 {
        let end = self.starts[route as usize + 1] as usize;
        self.points[3 * end - 1]
    }

    /// Its first point.
    pub fn start_of(&self, route: u32) -> Point {
        let s = 3 * self.starts[route as usize] as usize;
        Point::new(self.points[s], self.points[s + 1])
    }

    /// Where a creep is after `driven` metres along `route`, moving `cursor` (its segment index
    /// within the route, only ever forward) to the segment it is on; `None` past the end.
    pub fn position(&self, route: u32, driven: f32, cursor: &mut u32) -> Option<Point> {
        let first = self.starts[route as usize] as usize;
        let last = self.starts[route as usize + 1] as usize - 1;
        let at = |i: usize| {
            let k = 3 * i;
            (self.points[k], self.points[k + 1], self.points[k + 2])
        };
        if driven >= at(last).2 {
            return None;
        }
        let mut seg = first + *cursor as usize;
        if seg >= last || at(seg).2 > driven {
            // No usable cursor (a restored or respawned creep): binary search for the last
            // point at or before `driven`.
            let (mut lo, mut hi) = (first, last);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if at(mid).2 <= driven {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            seg = lo;
        }
        while seg + 1 < last && at(seg + 1).2 <= driven {
            seg += 1;
        }
        *cursor = (seg - first) as u32;
        let (x0, y0, d0) = at(seg);
        let (x1, y1, d1) = at(seg + 1);
        let t = if d1 > d0 {
            (driven - d0) / (d1 - d0)
        } else {
            0.0
        };
        Some(Point::new(x0 + (x1 - x0) * t, y0 + (y1 - y0) * t))
    }

    /// Bytes held by the packed arrays.
    pub fn heap_bytes(&self) -> usize {
        self.starts.capacity() * 4 + self.points.capacity() * 4
    }
}
