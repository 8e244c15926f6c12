//! swarm: the load-test harness for Muster and any server that speaks Nakama's client API.
//!
//! The crate is in layers, each a folder, each importing only the folders listed before it:
//!
//! - [`measure`] (bottom): mergeable latency sketches, counters and the worker's own resource
//!   use;
//! - [`scenario`] (bottom): the scenario file, its validation and the arrival schedule it
//!   describes;
//! - [`net`]: the transports (TCP, WebSocket upgrade, Muster's native TCP);
//! - [`steps`]: what a simulated player does: a small state machine ([`steps::player`]) per
//!   player and the chat, match and rpc steps;
//! - [`report`] (top): the report file (JSON, and its self-contained HTML page) and slices of it;
//! - [`run`] (top): a coordinator ([`run::coordinator`]) spreads players over worker processes
//!   ([`run::worker`]), each running them on one single-threaded runtime, and merges the
//!   per-second partial results they stream, and writes the report.
//!
//! Every latency goes into a mergeable HDR sketch ([`measure::sketch`]) measured from the
//! intended send time, so results from many workers and machines merge exactly and stalls cannot
//! hide. See the crate README for the CLI and the file formats.

pub mod measure;
pub mod net;
pub mod report;
pub mod run;
pub mod scenario;
pub mod steps;
