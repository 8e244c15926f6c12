//! Routes stored once and shared by every creep that drives them: one packed `f32` array of
//! `(x, y, metres from the start)` triples for all routes, and each route's first triple
//! (TDWorld's saving: a route as a float array, not an object per step).
//!
//! A creep's position is derived from its route and the distance it has driven; a cursor it
//! keeps (the segment it was on) makes that O(1) per tick as it only moves forward.

use std::collections::HashMap;

use crate::geo::Point;
use crate::map::RoadMap;

/// A creep's cursor before its segment is known: [`RouteStore::position`] searches the route.
pub const NO_CURSOR: u32 = u32::MAX;

/// Every route of a shard.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouteStore {
    /// Route `r`'s triples are `points[3 * starts[r] .. 3 * starts[r + 1]]`.
    pub(crate) starts: Vec<u32>,
    /// `x, y, metres from the start`, three floats per point.
    pub(crate) points: Vec<f32>,
    /// Routes by their end nodes, so that two connections between the same roads share one.
    by_ends: HashMap<(u32, u32), u32>,
    /// Each route's first road node, by route id (whose towers may send creeps along it).
    first_node: Vec<u32>,
}

impl RouteStore {
    pub fn new() -> RouteStore {
        RouteStore {
            starts: vec![0],
            points: Vec::new(),
            by_ends: HashMap::new(),
            first_node: Vec::new(),
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
            first_node: ends.iter().map(|e| e.0).collect(),
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
        self.first_node.push(ends.0);
        id
    }

    /// The road node route `route` leaves from (numbered across the shard's tiles).
    pub fn first_node(&self, route: u32) -> Option<u32> {
        self.first_node.get(route as usize).copied()
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
    /// within the route, only ever forward; [`NO_CURSOR`] when unknown) to the segment it is
    /// on; `None` past the end.
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
        // The segment holding `driven`: galloping forward from the cursor (where the creep was
        // last time: a comparison or two), or, with no usable cursor (restored, seeded under
        // way), a search of the whole route by halves.
        let from = first.saturating_add(*cursor as usize);
        let seg = if from < last && at(from).2 <= driven {
            let (mut lo, mut hi, mut step) = (from, from + 1, 1);
            while hi < last && at(hi).2 <= driven {
                lo = hi;
                step *= 2;
                hi = lo + step;
            }
            self.last_at_or_before(lo, hi.min(last), driven)
        } else {
            self.last_at_or_before(first, last, driven)
        };
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

    /// The last point of `lo..hi` at or before `driven` metres, given that `lo` is: a search
    /// by halves whose step is a conditional move, not a branch the CPU would mispredict at
    /// every step (a restore places millions of creeps this way).
    fn last_at_or_before(&self, mut lo: usize, hi: usize, driven: f32) -> usize {
        let mut len = hi - lo;
        while len > 1 {
            let half = len / 2;
            let past = self.points[3 * (lo + half) + 2] <= driven;
            lo = std::hint::select_unpredictable(past, lo + half, lo);
            len -= half;
        }
        lo
    }

    /// Bytes held by the packed arrays.
    pub fn heap_bytes(&self) -> usize {
        self.starts.capacity() * 4 + self.points.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One route whose segments are `steps` metres long (zero-length ones included, as a
    /// repeated node gives).
    fn route(steps: &[f32]) -> RouteStore {
        let mut points = vec![0.0, 0.0, 0.0];
        let mut along = 0.0;
        for (i, &step) in steps.iter().enumerate() {
            along += step;
            points.extend_from_slice(&[along, i as f32 + 1.0, along]);
        }
        RouteStore::from_parts(vec![0, steps.len() as u32 + 1], points, &[(0, 1)])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Whatever the cursor (behind, ahead, past the end, unknown), the segment found is
        /// the one a walk from the start finds: the last point at or before `driven`.
        #[test]
        fn any_cursor_finds_the_segment_a_walk_finds(
            steps in prop::collection::vec(prop_oneof![Just(0.0f32), 0.5f32..50.0], 1..200),
            fraction in 0.0f32..1.1,
            cursor in prop_oneof![Just(NO_CURSOR), 0u32..250],
        ) {
            let store = route(&steps);
            let d = |i: usize| store.points[3 * i + 2];
            let last = steps.len();
            let driven = store.length(0) * fraction;
            let mut found = cursor;
            let at = store.position(0, driven, &mut found);
            if driven >= d(last) {
                prop_assert_eq!(at, None);
            } else {
                let walked = (0..last).filter(|&i| d(i) <= driven).max().unwrap();
                prop_assert_eq!(found as usize, walked);
                let at = at.unwrap();
                prop_assert!(at.x >= d(walked) - 1e-3 && at.x <= d(walked + 1) + 1e-3);
            }
        }
    }
}
