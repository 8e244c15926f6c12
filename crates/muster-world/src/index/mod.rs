//! Spatial indexes: a uniform [`grid::Grid`] for moving creeps (a creep changes cell in O(1),
//! only when it crosses a cell boundary: no remove-and-reinsert in a tree on every move) and a
//! bulk-loaded R-tree ([`towers::TowerIndex`], the `rstar` crate) for towers, which stay put.

pub mod grid;
pub mod towers;
