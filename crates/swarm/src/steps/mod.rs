//! What a simulated player does, step by step: the layer that turns a scenario's `[[steps]]`
//! into requests and records what they cost.
//!
//! - [`ctx`]: what all players of a worker share (HTTP client, target, recorder, whether the
//!   run is over);
//! - [`player`]: the state machine every player runs, one step after another, and the basic
//!   steps (authenticate, connect, heartbeat, wait, disconnect);
//! - [`chat`]: `chat_join` and `chat` (room membership, message delivery latency);
//! - [`game`]: match and room steps (matchmake, join, play, replay over WebSocket or native TCP);
//! - [`lines`]: rooms run by a line-based game server (`protocol = "lines"`): the ticket join
//!   and `replay` with relay latency;
//! - [`rpc`]: server function calls at random intervals;
//! - [`storage`], [`leaderboard`]: a player's storage objects and leaderboard records over REST,
//!   at random intervals (`paced`: the schedule and the REST call they share);
//! - [`world`]: a player of Muster's persistent world: a panning viewport, claims, updates;
//! - [`tick_clock`]: where the server's ticks fall, so `play` sends inputs just ahead of them.
//!
//! Steps sit above `scenario` (what to do), `net` (how bytes reach the server) and `measure`
//! (where latencies and counts go); `run` drives them.

pub mod chat;
pub mod ctx;
pub mod game;
pub mod leaderboard;
pub mod lines;
pub(crate) mod paced;
pub mod player;
pub mod rpc;
pub mod storage;
pub mod tick_clock;
pub mod world;
