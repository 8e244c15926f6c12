//! Resets and ends told to server code, as Nakama's leaderboard scheduler tells them: a
//! leaderboard's reset at each occurrence of its schedule, a tournament's end when a period
//! closes for scores, and its reset when a period's records expire (its next reset, or its
//! end time).
//!
//! Records need no work at a reset (a period's records are kept apart by their expiry, see the
//! module's notes); only the hooks are told. Every node runs the scheduler once hooks are set
//! ([`Leaderboards::start_schedule`]); before telling an event a node claims it in the
//! database ([`crate::leaderboards::store::LeaderboardStore::claim_event`]), so in a cluster one node tells
//! each. An event that falls due while no node is running is not told later (as in Nakama).

use std::sync::Arc;
use std::time::Duration;

use super::tournament::TournamentInfo;
use super::{Board, LeaderboardInfo, Leaderboards};

/// The longest the scheduler sleeps before looking at the leaderboards again.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// Most events one board tells in one look (a clock jump does not flood the hooks).
const MAX_EVENTS_PER_LOOK: usize = 16;

/// What fell due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    LeaderboardReset,
    TournamentEnd,
    TournamentReset,
}

impl EventKind {
    /// As claims are stored.
    fn code(self) -> i16 {
        match self {
            EventKind::LeaderboardReset => 0,
            EventKind::TournamentEnd => 1,
            EventKind::TournamentReset => 2,
        }
    }
}

/// One event: of which leaderboard, at which Unix second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub kind: EventKind,
    pub id: String,
    pub at: i64,
}

/// Server code told of resets and ends.
#[async_trait::async_trait]
pub trait ScheduleHooks: Send + Sync {
    /// Whether a hook for `kind` exists (events of other kinds are not claimed).
    fn wants(&self, kind: EventKind) -> bool;
    /// A leaderboard has reset at `reset` (its `prev_reset`).
    async fn leaderboard_reset(&self, leaderboard: LeaderboardInfo, reset: i64);
    /// A tournament's period, open for scores until `end` and its records expiring at
    /// `reset`, has ended (`TournamentEnd`, at `end`) or expired (`TournamentReset`, at `reset`).
    async fn tournament(&self, kind: EventKind, tournament: TournamentInfo, end: i64, reset: i64);
}

impl Board {
    /// The first event of this board after the Unix second `t`.
    fn next_event_after(&self, t: i64) -> Option<i64> {
        if !self.is_tournament() {
            return self.next_after(t);
        }
        let end_time = self.def.tournament.end_time;
        if end_time > 0 && end_time <= t {
            return None;
        }
        let d = self.deadlines(t);
        [d.end_active, d.expiry]
            .into_iter()
            .filter(|&at| at > t)
            .min()
    }

    /// The events in `(after, now]`, oldest first.
    fn events_between(&self, after: i64, now: i64) -> Vec<Due> {
        let mut due = Vec::new();
        let mut t = after;
        while due.len() < MAX_EVENTS_PER_LOOK {
            let Some(at) = self.next_event_after(t).filter(|&at| at <= now) else {
                break;
            };
            let id = self.def.id.clone();
            if self.is_tournament() {
                let period = self.deadlines(at - 1);
                if period.end_active == at {
                    due.push(Due {
                        kind: EventKind::TournamentEnd,
                        id: id.clone(),
                        at,
                    });
                }
                if period.expiry == at {
                    due.push(Due {
                        kind: EventKind::TournamentReset,
                        id,
                        at,
                    });
                }
            } else {
                due.push(Due {
                    kind: EventKind::LeaderboardReset,
                    id,
                    at,
                });
            }
            t = at;
        }
        due
    }
}

impl Leaderboards {
    /// Every event of every leaderboard in `(after, now]` (Unix seconds).
    pub fn due_between(&self, after: i64, now: i64) -> Vec<Due> {
        let mut due: Vec<Due> = self
            .read_boards()
            .values()
            .flat_map(|board| board.events_between(after, now))
            .collect();
        due.sort_by(|a, b| (a.at, &a.id).cmp(&(b.at, &b.id)));
        due
    }

    /// The first event of any leaderboard after the Unix second `now`.
    fn next_event_after(&self, now: i64) -> Option<i64> {
        self.read_boards()
            .values()
            .filter_map(|board| board.next_event_after(now))
            .min()
    }

    /// Tells `hooks` of the events in `(after, now]` this node claims; each hook runs in a task
    /// of its own, so a slow one holds back no other. The events told.
    pub async fn tell_due(&self, after: i64, now: i64, hooks: &Arc<dyn ScheduleHooks>) -> Vec<Due> {
        let mut told = Vec::new();
        for due in self.due_between(after, now) {
            if !hooks.wants(due.kind) {
                continue;
            }
            let claim = self
                .store
                .claim_event(
                    due.id.clone(),
                    due.kind.code(),
                    due.at,
                    self.node().to_string(),
                )
                .await;
            match claim {
                Ok(true) => {}
                Ok(false) => continue,
                Err(error) => {
                    tracing::warn!(id = %due.id, at = due.at, %error, "a leaderboard event could not be claimed; it is not told");
                    continue;
                }
            }
            let Ok(board) = self.board(&due.id) else {
                continue;
            };
            let hooks = hooks.clone();
            match due.kind {
                EventKind::LeaderboardReset => {
                    let info = LeaderboardInfo {
                        def: board.def.clone(),
                        prev_reset: due.at,
                        next_reset: board.next_after(due.at).unwrap_or(0),
                    };
                    let reset = due.at;
                    tokio::spawn(async move { hooks.leaderboard_reset(info, reset).await });
                }
                kind => {
                    // The tournament as it was in the period that ended (its size, its window).
                    let info = match self.info(&board, due.at - 1).await {
                        Ok(info) => info,
                        Err(error) => {
                            tracing::warn!(id = %due.id, %error, "a tournament event could not be read; it is not told");
                            continue;
                        }
                    };
                    let (end, reset) = (info.deadlines.end_active, info.deadlines.expiry);
                    tokio::spawn(async move { hooks.tournament(kind, info, end, reset).await });
                }
            }
            told.push(due);
        }
        told
    }

    /// Runs the scheduler on this node until the leaderboards are dropped: it sleeps until the
    /// next event (or a leaderboard is created or deleted), then tells `hooks` of what fell
    /// due.
    pub fn start_schedule(self: &Arc<Self>, hooks: Arc<dyn ScheduleHooks>) {
        let weak = Arc::downgrade(self);
        let changed = self.changed.clone();
        let mut after = self.clock.now_secs();
        tokio::spawn(async move {
            loop {
                let Some(leaderboards) = weak.upgrade() else {
                    return;
                };
                let now = leaderboards.clock.now_secs();
                if now > after {
                    leaderboards.tell_due(after, now, &hooks).await;
                    after = now;
                }
                let wait = leaderboards.next_event_after(now).map_or(MAX_WAIT, |at| {
                    // Until the second `at` has begun.
                    let ms = (at * 1000 - leaderboards.clock.now_ms()).max(1);
                    Duration::from_millis(ms as u64).min(MAX_WAIT)
                });
                drop(leaderboards);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = changed.notified() => {}
                }
            }
        });
    }
}
