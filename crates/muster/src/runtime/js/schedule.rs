//! `registerLeaderboardReset`, `registerTournamentEnd`, `registerTournamentReset`: the
//! leaderboards' scheduler ([`crate::leaderboards::schedule`]) tells the module, with the
//! leaderboard or tournament in the runtime's shape and the times as Unix seconds.

use std::sync::Arc;

use muster_js::Hook;
use serde_json::{json, Value};

use super::nk::context::shaped;
use super::nk::leaderboard;
use super::Module;
use crate::leaderboards::schedule::{EventKind, ScheduleHooks};
use crate::leaderboards::tournament::TournamentInfo;
use crate::leaderboards::view::tournament;
use crate::leaderboards::LeaderboardInfo;

/// The module's scheduler hooks.
pub struct JsSchedule(pub Arc<Module>);

impl JsSchedule {
    /// Whether the bundle in force registered any of them.
    pub fn registered(module: &Module) -> bool {
        !module.bundle.read().registered.schedule.is_empty()
    }

    async fn tell(&self, kind: EventKind, args: Vec<Value>) {
        let (id, mode) = names(kind);
        let context = json!({
            "executionMode": mode,
            "env": self.0.env,
            "node": self.0.node,
            "queryParams": {},
            "headers": {},
            "vars": {},
        });
        let cost = self.0.hook_cost(Hook::Schedule, id);
        let answer = self
            .0
            .run(&cost, move |vm| {
                vm.call_hook(Hook::Schedule, id, &context, &args)
            })
            .await;
        if let Err(error) = answer {
            tracing::warn!(hook = id, message = %error.message, "a JavaScript scheduler hook failed");
        }
    }
}

/// A hook's id in the registry and Nakama's execution mode for it.
fn names(kind: EventKind) -> (&'static str, &'static str) {
    match kind {
        EventKind::LeaderboardReset => ("leaderboardReset", "leaderboard_reset"),
        EventKind::TournamentEnd => ("tournamentEnd", "tournament_end"),
        EventKind::TournamentReset => ("tournamentReset", "tournament_reset"),
    }
}

#[async_trait::async_trait]
impl ScheduleHooks for JsSchedule {
    fn wants(&self, kind: EventKind) -> bool {
        let (id, _) = names(kind);
        self.0
            .bundle
            .read()
            .registered
            .schedule
            .iter()
            .any(|n| n == id)
    }

    async fn leaderboard_reset(&self, info: LeaderboardInfo, reset: i64) {
        self.tell(
            EventKind::LeaderboardReset,
            vec![leaderboard(&info), json!(reset)],
        )
        .await;
    }

    async fn tournament(&self, kind: EventKind, info: TournamentInfo, end: i64, reset: i64) {
        let tournament = shaped(tournament(info));
        self.tell(kind, vec![tournament, json!(end), json!(reset)])
            .await;
    }
}
