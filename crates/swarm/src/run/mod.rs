//! Running a load test: the top layer, which spreads players over processes and collects what
//! they measured.
//!
//! - [`coordinator`]: `swarm run`: validates the scenario, starts the worker processes, merges
//!   their per-second results, prints progress and writes the report;
//! - [`worker`]: `swarm worker`: one process running its share of the players on a
//!   single-threaded runtime, streaming ticks and a final result on stdout.

pub mod coordinator;
pub mod worker;
