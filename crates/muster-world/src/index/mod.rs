//! Spatial indexes, both uniform grids over the shard's area ([`grid::Cells`]): one for moving
//! creeps ([`grid::Grid`]: a creep changes cell in O(1), only when it crosses a cell boundary;
//! no remove-and-reinsert in a tree on every move) and one for towers
//! ([`towers::TowerIndex`]), which stay put and are filled at once when a shard is seeded or
//! restored.

pub mod grid;
pub mod towers;
