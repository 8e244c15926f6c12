//! What every player of a worker shares: the HTTP client, the resolved target, the scenario's
//! steps, the recorder, and where the run is (over or not, players still busy).
//!
//! It is built by the worker (`run::worker`) and read by every step. It lives here, with the
//! steps, so that the steps do not depend on the layer that drives them. Workers are
//! single-threaded, so it is shared through an `Rc` with `Cell`/`RefCell` inside: no locks, no
//! atomics.

use std::cell::{Cell, RefCell};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::sync::Notify;

use super::chat::WallClock;
use crate::measure::stats::Recorder;
use crate::scenario::Step;

/// State shared by all players of the worker (single-threaded: `Rc` + `Cell`/`RefCell`).
pub struct Ctx {
    pub http: reqwest::Client,
    /// `http://host:port` (no trailing slash).
    pub base_url: String,
    /// `host:port`, the Host header of the WebSocket upgrade.
    pub host: String,
    /// Path of the realtime endpoint, `/ws` (under the target's path prefix, if any).
    pub ws_path: String,
    /// The resolved server address.
    pub addr: SocketAddr,
    pub source_ip: Option<IpAddr>,
    pub server_key: String,
    /// Short tag of the run, so device IDs are new on every run.
    pub run_tag: String,
    pub steps: Vec<Step>,
    /// For each step: whether a later step still needs the session token.
    pub token_needed_after: Vec<bool>,
    pub default_timeout: Duration,
    /// Wall-clock time on this worker's steady timeline (chat timestamps cross processes).
    pub clock: WallClock,
    /// Read buffer of each player's WebSocket (larger when the scenario chats).
    pub read_buffer: usize,
    pub rec: RefCell<Recorder>,
    /// The worker's ENet client hosts, shared by its players (`transport = "enet"`).
    pub enet: crate::net::enet::EnetClients,
    /// The worker's gRPC connections (`api = "grpc"`), opened on first use.
    pub grpc: crate::net::grpc::GrpcClients,
    /// Wakes every idle player when the run is over.
    pub stop: Notify,
    /// Whether the run is over and how many players are still busy; the worker builds it with
    /// `Lifecycle::default()` and moves it on only through the methods below.
    pub lifecycle: Lifecycle,
}

/// Where the worker's run is: over or not, and how many players are still busy. Its fields are
/// private so that only [`Ctx`]'s methods change them, in the order the players rely on.
#[derive(Debug, Default)]
pub struct Lifecycle {
    /// Set when the run is over (end of the last phase, or stopped).
    over: Cell<bool>,
    /// Players started and not yet finished.
    active: Cell<u64>,
    /// Signalled when the last active player finishes.
    all_done: Notify,
}

impl Ctx {
    pub fn is_over(&self) -> bool {
        self.lifecycle.over.get()
    }

    /// Called by the worker as it starts a player.
    pub fn player_started(&self) {
        let active = &self.lifecycle.active;
        active.set(active.get() + 1);
    }

    /// Called by each player exactly once, when it has been accounted for.
    pub fn player_done(&self) {
        let left = self.lifecycle.active.get().saturating_sub(1);
        self.lifecycle.active.set(left);
        if left == 0 {
            self.lifecycle.all_done.notify_one();
        }
    }

    /// Ends the run: marks it over and wakes every idle player, so each closes and reports.
    pub fn end_run(&self) {
        self.lifecycle.over.set(true);
        self.stop.notify_waiters();
    }

    /// Players started and not yet accounted for.
    pub fn active_players(&self) -> u64 {
        self.lifecycle.active.get()
    }

    /// Resolves once every started player has been accounted for.
    pub async fn all_finished(&self) {
        while self.lifecycle.active.get() > 0 {
            self.lifecycle.all_done.notified().await;
        }
    }
}
