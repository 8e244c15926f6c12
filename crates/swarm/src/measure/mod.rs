//! What gets measured, and how measurements travel and merge. The bottom layer: it depends on
//! nothing else in the crate.
//!
//! - [`sketch`]: mergeable HDR histograms of latencies (exact merges across workers and
//!   machines);
//! - [`stats`]: metrics, counters, the worker's recorder, and the aggregate that folds
//!   per-second ticks and final results from any number of workers;
//! - [`resources`]: the worker process's own CPU time, RSS and open-file limit, from `/proc`.

pub mod resources;
pub mod sketch;
pub mod stats;
