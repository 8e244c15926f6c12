//! Towers in an R-tree (`rstar`), bulk-loaded when a shard is seeded or restored; a tower
//! claimed later is inserted (claims are rare next to queries).

use rstar::primitives::GeomWithData;
use rstar::{RTree, AABB};

use crate::geo::{Point, Rect};

type Entry = GeomWithData<[f32; 2], u32>;

#[derive(Debug, Clone, Default)]
pub struct TowerIndex {
    tree: RTree<Entry>,
}

impl TowerIndex {
    /// The index of towers `(position, id)`, bulk-loaded.
    pub fn bulk_load(towers: impl Iterator<Item = (Point, u32)>) -> TowerIndex {
        TowerIndex {
            tree: RTree::bulk_load(towers.map(|(p, id)| Entry::new([p.x, p.y], id)).collect()),
        }
    }

    pub fn insert(&mut self, p: Point, id: u32) {
        self.tree.insert(Entry::new([p.x, p.y], id));
    }

    /// Towers inside `rect`.
    pub fn in_rect(&self, rect: &Rect, mut f: impl FnMut(u32)) {
        let envelope = AABB::from_corners([rect.min.x, rect.min.y], [rect.max.x, rect.max.y]);
        for e in self.tree.locate_in_envelope(&envelope) {
            f(e.data);
        }
    }

    /// Towers within `radius` metres of `p`.
    pub fn within(&self, p: Point, radius: f32, mut f: impl FnMut(u32)) {
        for e in self
            .tree
            .locate_within_distance([p.x, p.y], radius * radius)
        {
            f(e.data);
        }
    }

    pub fn len(&self) -> usize {
        self.tree.size()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
