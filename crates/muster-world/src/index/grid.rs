//! A uniform grid of square cells over a shard's area, each cell the list of the creeps in it
//! with their owner and position as of the last tick, so that a range query reads one
//! contiguous list per cell and nothing else (no lookup of the creep's own columns).
//!
//! A creep knows its cell and its slot in that cell's list, so leaving a cell is a
//! `swap_remove` (the creep moved into the hole learns its new slot) and entering one a push:
//! both O(1); moving within a cell rewrites its position in place. Points outside the area are
//! clamped to the border cells.

use crate::geo::{Point, Rect};

/// A creep as the grid holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entry {
    pub id: u32,
    pub owner: u32,
    pub pos: Point,
}

/// The geometry of a uniform grid of square cells over an area: the cell a point falls in
/// (points outside the area clamped to the border cells) and the cells a box touches. Shared
/// by the creeps' [`Grid`] and the towers' index.
#[derive(Debug, Clone)]
pub struct Cells {
    area: Rect,
    cell_m: f32,
    cols: u32,
    rows: u32,
}

impl Cells {
    /// Cells of `cell_m` metres (at least 1) over `area`.
    pub fn new(area: Rect, cell_m: f32) -> Cells {
        let cell_m = cell_m.max(1.0);
        let cols = ((area.width() / cell_m).ceil() as u32).max(1);
        let rows = ((area.height() / cell_m).ceil() as u32).max(1);
        Cells {
            area,
            cell_m,
            cols,
            rows,
        }
    }

    pub fn cell_m(&self) -> f32 {
        self.cell_m
    }

    /// How many cells there are.
    pub fn count(&self) -> usize {
        (self.cols * self.rows) as usize
    }

    fn col_row(&self, p: Point) -> (u32, u32) {
        // A float-to-integer cast saturates (negatives and NaN to 0), which is the clamp to
        // the first row or column that the floor of a negative would need anyway; so no
        // `floor()` (a libm call on this target, a tenth of a restore's placing).
        let c = ((p.x - self.area.min.x) / self.cell_m) as u32;
        let r = ((p.y - self.area.min.y) / self.cell_m) as u32;
        (c.min(self.cols - 1), r.min(self.rows - 1))
    }

    /// The cell holding `p`.
    pub fn cell_of(&self, p: Point) -> u32 {
        let (c, r) = self.col_row(p);
        r * self.cols + c
    }

    /// Every cell `rect` touches, row by row.
    pub fn touching(&self, rect: &Rect, mut f: impl FnMut(u32)) {
        let (c0, r0) = self.col_row(rect.min);
        let (c1, r1) = self.col_row(rect.max);
        for r in r0..=r1 {
            for c in c0..=c1 {
                f(r * self.cols + c);
            }
        }
    }
}

/// Lists of items by cell over a [`Cells`] geometry: what both indexes are made of.
#[derive(Debug, Clone)]
pub struct CellLists<T> {
    geometry: Cells,
    lists: Vec<Vec<T>>,
}

impl<T: Clone> CellLists<T> {
    /// Empty lists of `cell_m`-metre cells over `area`.
    pub fn new(area: Rect, cell_m: f32) -> CellLists<T> {
        let geometry = Cells::new(area, cell_m);
        CellLists {
            lists: vec![Vec::new(); geometry.count()],
            geometry,
        }
    }

    pub fn geometry(&self) -> &Cells {
        &self.geometry
    }

    /// Makes room in each cell for as many items as `counts` gives it (by cell number).
    pub fn reserve_counted(&mut self, counts: &[u32]) {
        for (list, &n) in self.lists.iter_mut().zip(counts) {
            list.reserve_exact(n as usize);
        }
    }

    /// Appends `item` to `cell`'s list; returns its slot there.
    pub fn push(&mut self, cell: u32, item: T) -> u32 {
        let list = &mut self.lists[cell as usize];
        list.push(item);
        list.len() as u32 - 1
    }

    /// `cell`'s list.
    pub fn list_mut(&mut self, cell: u32) -> &mut Vec<T> {
        &mut self.lists[cell as usize]
    }

    /// The items of every cell that `rect` touches (a superset of those inside it).
    pub fn touched(&self, rect: &Rect, mut f: impl FnMut(&T)) {
        self.geometry.touching(rect, |cell| {
            for item in &self.lists[cell as usize] {
                f(item);
            }
        });
    }

    /// Items in all cells.
    pub fn len(&self) -> usize {
        self.lists.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.lists.iter().all(Vec::is_empty)
    }

    /// Bytes held by the lists.
    pub fn heap_bytes(&self) -> usize {
        self.lists.capacity() * std::mem::size_of::<Vec<T>>()
            + self
                .lists
                .iter()
                .map(|l| l.capacity() * std::mem::size_of::<T>())
                .sum::<usize>()
    }
}

#[derive(Debug, Clone)]
pub struct Grid {
    cells: CellLists<Entry>,
}

impl Grid {
    /// A grid of `cell_m`-metre cells over `area`.
    pub fn new(area: Rect, cell_m: f32) -> Grid {
        Grid {
            cells: CellLists::new(area, cell_m),
        }
    }

    pub fn cell_m(&self) -> f32 {
        self.cells.geometry().cell_m()
    }

    /// The cell holding `p`.
    pub fn cell_of(&self, p: Point) -> u32 {
        self.cells.geometry().cell_of(p)
    }

    /// Puts `entry` in the cell of its position; returns the cell and its slot there.
    pub fn insert(&mut self, entry: Entry) -> (u32, u32) {
        let cell = self.cell_of(entry.pos);
        (cell, self.insert_into(cell, entry))
    }

    /// Puts `entry` in `cell` (which must be the cell of its position); returns its slot.
    pub fn insert_into(&mut self, cell: u32, entry: Entry) -> u32 {
        self.cells.push(cell, entry)
    }

    /// How many cells there are.
    pub fn cell_count(&self) -> usize {
        self.cells.geometry().count()
    }

    /// Makes room in each cell for as many entries as `counts` gives it (by cell number).
    pub fn reserve_counted(&mut self, counts: &[u32]) {
        self.cells.reserve_counted(counts);
    }

    /// Moves the entry at `slot` of `cell` to `pos` in place (its cell must hold `pos`).
    pub fn update(&mut self, cell: u32, slot: u32, pos: Point) {
        self.cells.list_mut(cell)[slot as usize].pos = pos;
    }

    /// Takes the entry at `slot` out of `cell`; returns the id now at `slot` (moved from the
    /// end), whose slot the caller must update, if any.
    pub fn remove(&mut self, cell: u32, slot: u32) -> Option<u32> {
        let list = self.cells.list_mut(cell);
        list.swap_remove(slot as usize);
        list.get(slot as usize).map(|e| e.id)
    }

    /// The entries in every cell that `rect` touches (a superset of those inside it).
    pub fn candidates(&self, rect: &Rect, f: impl FnMut(&Entry)) {
        self.cells.touched(rect, f);
    }

    /// Entries in all cells.
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
