//! swarm: the load-test harness for Muster and any server that speaks Nakama's client API.
//!
//! Simulated players are small state machines ([`player`]) on the single-threaded runtime of a
//! worker process ([`worker`]); a coordinator ([`coordinator`]) spreads players over workers,
//! merges the per-second partial results they stream, and writes the report ([`report`], with
//! its self-contained HTML page in [`html`]). What players do and when they arrive comes from a
//! scenario file ([`scenario`], [`ramp`]). Every latency goes into a mergeable HDR sketch
//! ([`sketch`]) measured from the intended send time, so results from many workers and machines
//! merge exactly and stalls cannot hide. See the crate README for the CLI and the file formats.

pub mod chat;
pub mod coordinator;
pub mod game;
pub mod html;
pub mod native;
pub mod player;
pub mod ramp;
pub mod replay;
pub mod report;
pub mod resources;
pub mod rpc;
pub mod scenario;
pub mod sketch;
pub mod stats;
pub mod tick_clock;
pub mod transport;
pub mod window;
pub mod worker;
