//! Towers in a uniform grid of cells, each cell the list of its towers' positions and ids.
//! Towers stay put and are only ever added, so a cell's list only grows: a claim is a push. A
//! seeded or restored shard fills the whole index at once, every cell sized before it is
//! filled (a counting pass): far cheaper than bulk-loading a tree, and a box or range query
//! reads the few contiguous lists it touches.

use crate::geo::{Point, Rect};
use crate::index::grid::Cells;

#[derive(Debug, Clone)]
pub struct TowerIndex {
    geometry: Cells,
    cells: Vec<Vec<(Point, u32)>>,
    len: usize,
}

impl TowerIndex {
    /// An empty index of `cell_m`-metre cells over `area` (towers outside it go to the border
    /// cells).
    pub fn new(area: Rect, cell_m: f32) -> TowerIndex {
        let geometry = Cells::new(area, cell_m);
        TowerIndex {
            cells: vec![Vec::new(); geometry.count()],
            geometry,
            len: 0,
        }
    }

    /// The index of `towers` (position, id), each cell sized before it is filled.
    pub fn build(area: Rect, cell_m: f32, towers: impl Iterator<Item = (Point, u32)>) -> Self {
        let mut index = TowerIndex::new(area, cell_m);
        let placed: Vec<(u32, Point, u32)> = towers
            .map(|(p, id)| (index.geometry.cell_of(p), p, id))
            .collect();
        let mut counts = vec![0u32; index.cells.len()];
        for &(cell, _, _) in &placed {
            counts[cell as usize] += 1;
        }
        for (list, n) in index.cells.iter_mut().zip(counts) {
            list.reserve_exact(n as usize);
        }
        for (cell, p, id) in placed {
            index.cells[cell as usize].push((p, id));
        }
        index.len = index.cells.iter().map(Vec::len).sum();
        index
    }

    pub fn insert(&mut self, p: Point, id: u32) {
        let cell = self.geometry.cell_of(p);
        self.cells[cell as usize].push((p, id));
        self.len += 1;
    }

    /// Towers inside `rect`.
    pub fn in_rect(&self, rect: &Rect, mut f: impl FnMut(u32)) {
        self.geometry.touching(rect, |cell| {
            for &(p, id) in &self.cells[cell as usize] {
                if rect.contains(p) {
                    f(id);
                }
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
        self.geometry.touching(&square, |cell| {
            for &(at, id) in &self.cells[cell as usize] {
                if at.distance2(p) <= r2 {
                    f(id);
                }
            }
        });
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held by the cells' lists.
    pub fn heap_bytes(&self) -> usize {
        self.cells.capacity() * std::mem::size_of::<Vec<(Point, u32)>>()
            + self
                .cells
                .iter()
                .map(|c| c.capacity() * std::mem::size_of::<(Point, u32)>())
                .sum::<usize>()
    }
}
