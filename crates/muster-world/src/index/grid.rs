//! A uniform grid of square cells over a shard's area, each cell the list of the creeps in it.
//!
//! A creep knows its cell and its slot in that cell's list, so leaving a cell is a
//! `swap_remove` (the creep moved into the hole learns its new slot) and entering one a push:
//! both O(1). Points outside the area are clamped to the border cells.

use crate::geo::{Point, Rect};

#[derive(Debug, Clone)]
pub struct Grid {
    area: Rect,
    cell_m: f32,
    cols: u32,
    rows: u32,
    cells: Vec<Vec<u32>>,
}

impl Grid {
    /// A grid of `cell_m`-metre cells over `area`.
    pub fn new(area: Rect, cell_m: f32) -> Grid {
        let cell_m = cell_m.max(1.0);
        let cols = ((area.width() / cell_m).ceil() as u32).max(1);
        let rows = ((area.height() / cell_m).ceil() as u32).max(1);
        Grid {
            area,
            cell_m,
            cols,
            rows,
            cells: vec![Vec::new(); (cols * rows) as usize],
        }
    }

    pub fn cell_m(&self) -> f32 {
        self.cell_m
    }

    fn col_row(&self, p: Point) -> (u32, u32) {
        let c = ((p.x - self.area.min.x) / self.cell_m).floor();
        let r = ((p.y - self.area.min.y) / self.cell_m).floor();
        (
            (c.max(0.0) as u32).min(self.cols - 1),
            (r.max(0.0) as u32).min(self.rows - 1),
        )
    }

    /// The cell holding `p`.
    pub fn cell_of(&self, p: Point) -> u32 {
        let (c, r) = self.col_row(p);
        r * self.cols + c
    }

    /// Puts `id` in `cell`; returns its slot there.
    pub fn insert(&mut self, cell: u32, id: u32) -> u32 {
        let list = &mut self.cells[cell as usize];
        list.push(id);
        list.len() as u32 - 1
    }

    /// Takes the entry at `slot` out of `cell`; returns the id now at `slot` (moved from the
    /// end), whose slot the caller must update, if any.
    pub fn remove(&mut self, cell: u32, slot: u32) -> Option<u32> {
        let list = &mut self.cells[cell as usize];
        list.swap_remove(slot as usize);
        list.get(slot as usize).copied()
    }

    /// The ids in every cell that `rect` touches (a superset of those inside it).
    pub fn candidates(&self, rect: &Rect, mut f: impl FnMut(u32)) {
        let (c0, r0) = self.col_row(rect.min);
        let (c1, r1) = self.col_row(rect.max);
        for r in r0..=r1 {
            for c in c0..=c1 {
                for &id in &self.cells[(r * self.cols + c) as usize] {
                    f(id);
                }
            }
        }
    }

    /// Entries in all cells.
    pub fn len(&self) -> usize {
        self.cells.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by the cells' lists.
    pub fn heap_bytes(&self) -> usize {
        self.cells.capacity() * std::mem::size_of::<Vec<u32>>()
            + self.cells.iter().map(|c| c.capacity() * 4).sum::<usize>()
    }
}
