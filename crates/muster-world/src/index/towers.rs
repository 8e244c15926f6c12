//! Towers in a uniform grid of cells, each cell the list of its towers' positions and ids.
//! Towers stay put and are only ever added, so a cell's list only grows: a claim is a push. A
//! seeded or restored shard fills the whole index at once, every cell sized before it is
//! filled (a counting pass): far cheaper than bulk-loading a tree, and a box or range query
//! reads the few contiguous lists it touches.

use crate::geo::{Point, Rect};
use crate::index::grid::CellLists;

#[derive(Debug, Clone)]
pub struct TowerIndex {
    cells: CellLists<(Point, u32)>,
}

impl TowerIndex {
    /// An empty index of `cell_m`-metre cells over `area` (towers outside it go to the border
    /// cells).
    pub fn new(area: Rect, cell_m: f32) -> TowerIndex {
        TowerIndex {
            cells: CellLists::new(area, cell_m),
        }
    }

    /// The index of `towers` (position, id), each cell sized before it is filled.
    pub fn build(area: Rect, cell_m: f32, towers: impl Iterator<Item = (Point, u32)>) -> Self {
        let mut index = TowerIndex::new(area, cell_m);
        let geometry = index.cells.geometry();
        let placed: Vec<(u32, Point, u32)> =
            towers.map(|(p, id)| (geometry.cell_of(p), p, id)).collect();
        let mut counts = vec![0u32; geometry.count()];
        for &(cell, _, _) in &placed {
            counts[cell as usize] += 1;
        }
        index.cells.reserve_counted(&counts);
        for (cell, p, id) in placed {
            index.cells.push(cell, (p, id));
        }
        index
    }

    pub fn insert(&mut self, p: Point, id: u32) {
        let cell = self.cells.geometry().cell_of(p);
        self.cells.push(cell, (p, id));
    }

    /// Towers inside `rect`.
    pub fn in_rect(&self, rect: &Rect, mut f: impl FnMut(u32)) {
        self.cells.touched(rect, |&(p, id)| {
            if rect.contains(p) {
                f(id);
            }
        });
    }

    /// Towers within `radius` metres of `p`.
    pub fn within(&self, p: Point, radius: f32, mut f: impl FnMut(u32)) {
        let r2 = radius * radius;
        let square = Rect {
            min: Point::new(p.x - radius, p.y - radius),
            max: Point::new(p.x + radius, p.y + radius),
        };
        self.cells.touched(&square, |&(at, id)| {
            if at.distance2(p) <= r2 {
                f(id);
            }
        });
    }

    pub fn len(&self) -> usize {
        self.cells.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Bytes held by the cells' lists.
    pub fn heap_bytes(&self) -> usize {
        self.cells.heap_bytes()
    }
}
