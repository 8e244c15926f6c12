//! Running a load test: the top layer, which spreads players over processes and machines and
//! collects what they measured.
//!
//! - [`coordinator`]: `swarm run`: validates the scenario, gives each worker its share and one
//!   start instant, merges their per-second results, prints progress and writes the report;
//! - [`fleet`]: the coordinator's workers before the start: local child processes, or remote
//!   ones found by address or DNS name; greeting each (token, capacity, clock);
//! - [`protocol`]: what coordinator and worker say to each other, as JSON lines;
//! - [`worker`]: `swarm worker`: one process running its share of the players on a
//!   single-threaded runtime, streaming ticks and a final result;
//! - [`listen`]: `swarm worker --listen`: a worker on another machine, waiting for a
//!   coordinator.

pub mod coordinator;
pub mod fleet;
pub mod listen;
pub mod protocol;
pub mod worker;
