//! `registerLeaderboardReset`, `registerTournamentEnd`, `registerTournamentReset`: the
//! leaderboards' scheduler ([`crate::leaderboards::schedule`]) tells the module, with the
//! leaderboard or tournament in the runtime's shape and the times as Unix seconds.

use std::sync::Arc;

use muster_js::Hook;
use serde_json::{json, Value};

use super::host::shaped;
use super::Module;
use crate::leaderboards::schedule::{EventKind, LeaderboardInfo, ScheduleHooks};
use crate::leaderboards::tournament::TournamentInfo;
use crate::leaderboards::view::tournament;

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

/// A leaderboard as Nakama's runtime gives one: its operator by name, its metadata an object,
/// times in Unix seconds.
fn leaderboard(info: &LeaderboardInfo) -> Value {
    let def = &info.def;
    let operator = match def.operator {
        crate::leaderboards::SET => "set",
        crate::leaderboards::INCREMENT => "increment",
        crate::leaderboards::DECREMENT => "decrement",
        _ => "best",
    };
    let metadata: Value = serde_json::from_str(&def.metadata).unwrap_or_else(|_| json!({}));
    json!({
        "id": def.id,
        "title": def.tournament.title,
        "description": def.tournament.description,
        "category": def.tournament.category,
        "authoritative": def.authoritative,
        "sortOrder": def.sort_order,
        "operator": operator,
        "prevReset": info.prev_reset,
        "nextReset": info.next_reset,
        "metadata": metadata,
        "createTime": def.create_time_ms / 1000,
    })
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

    async fn tournament_end(&self, info: TournamentInfo, end: i64, reset: i64) {
        let tournament = shaped(tournament(info));
        self.tell(
            EventKind::TournamentEnd,
            vec![tournament, json!(end), json!(reset)],
        )
        .await;
    }

    async fn tournament_reset(&self, info: TournamentInfo, end: i64, reset: i64) {
        let tournament = shaped(tournament(info));
        self.tell(
            EventKind::TournamentReset,
            vec![tournament, json!(end), json!(reset)],
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{LeaderboardDef, TournamentFields};

    #[test]
    fn a_leaderboard_has_the_runtime_shape() {
        let info = LeaderboardInfo {
            def: LeaderboardDef {
                id: "weekly".into(),
                authoritative: true,
                sort_order: crate::leaderboards::ASCENDING,
                operator: crate::leaderboards::INCREMENT,
                reset_schedule: "0 0 * * 1".into(),
                metadata: r#"{"prize":"gold"}"#.into(),
                create_time_ms: 1_700_000_000_123,
                tournament: TournamentFields::default(),
            },
            prev_reset: 1_767_571_200,
            next_reset: 1_768_176_000,
        };
        assert_eq!(
            leaderboard(&info),
            json!({
                "id": "weekly", "title": "", "description": "", "category": 0,
                "authoritative": true, "sortOrder": 0, "operator": "increment",
                "prevReset": 1_767_571_200, "nextReset": 1_768_176_000,
                "metadata": {"prize": "gold"}, "createTime": 1_700_000_000,
            })
        );
    }
}
