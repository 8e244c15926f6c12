//! The leaderboards' scheduler, on SQLite and PostgreSQL: which resets and ends fall due in a
//! window of time (a daily leaderboard, an hourly tournament open half of each hour, a one-off
//! tournament), what the hooks are told of each (Nakama's arguments), and that an event is told
//! once — a second look at the same window, as another node of a cluster would take, tells
//! nothing.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use muster::functions::{Call, Functions, RpcError, ServerFunction};
use muster::leaderboards::schedule::{EventKind, ScheduleHooks};
use muster::leaderboards::tournament::NewTournament;
use muster::leaderboards::tournament::TournamentInfo;
use muster::leaderboards::LeaderboardInfo;
use muster::leaderboards::NewLeaderboard;
use serde_json::{json, Value};
use support::{Backend, Database, TestServer};
use tokio::sync::{mpsc, Mutex};

on_both_backends!(resets_and_ends_are_told_once_with_nakamas_arguments);

/// 2026-01-05 00:00:00 UTC.
const T: i64 = 1_767_571_200;
const HOUR: i64 = 3600;

/// Hooks that write down what they are told.
struct Recorder(mpsc::UnboundedSender<Value>);

#[async_trait::async_trait]
impl ScheduleHooks for Recorder {
    fn wants(&self, _: EventKind) -> bool {
        true
    }

    async fn leaderboard_reset(&self, info: LeaderboardInfo, reset: i64) {
        let _ = self.0.send(json!({
            "hook": "leaderboard_reset", "id": info.def.id, "at": reset,
            "prev_reset": info.prev_reset, "next_reset": info.next_reset,
        }));
    }

    async fn tournament(&self, kind: EventKind, info: TournamentInfo, end: i64, reset: i64) {
        let (hook, at) = match kind {
            EventKind::TournamentEnd => ("tournament_end", end),
            _ => ("tournament_reset", reset),
        };
        let _ = self.0.send(json!({
            "hook": hook, "id": info.def.id, "at": at, "end": end, "reset": reset,
        }));
    }
}

/// `tell` {after, now}: the events this node claims in `(after, now]` and what the hooks heard.
struct Tell {
    hooks: Arc<dyn ScheduleHooks>,
    heard: Mutex<mpsc::UnboundedReceiver<Value>>,
}

#[async_trait::async_trait]
impl ServerFunction for Tell {
    async fn call(&self, call: Call<'_>) -> Result<String, RpcError> {
        let request: Value = call.json()?;
        let (after, now) = (
            request["after"].as_i64().unwrap_or(0),
            request["now"].as_i64().unwrap_or(0),
        );
        let mut heard_rx = self.heard.lock().await;
        let told = call.leaderboards.tell_due(after, now, &self.hooks).await;
        let mut heard = Vec::new();
        for _ in &told {
            let one = tokio::time::timeout(Duration::from_secs(10), heard_rx.recv())
                .await
                .map_err(|_| RpcError::invalid("a hook was never called"))?;
            heard.extend(one);
        }
        heard.sort_by_key(|h| (h["at"].as_i64(), h["id"].as_str().map(str::to_owned)));
        let told: Vec<Value> = told
            .into_iter()
            .map(|d| json!([format!("{:?}", d.kind), d.id, d.at]))
            .collect();
        Ok(json!({ "told": told, "heard": heard }).to_string())
    }
}

async fn tell(server: &TestServer, after: i64, now: i64) -> Value {
    let response = server
        .http
        .post(server.url("/v2/rpc/tell?http_key=defaulthttpkey"))
        .json(&Value::String(
            json!({"after": after, "now": now}).to_string(),
        ))
        .send()
        .await
        .expect("request");
    let (status, body) = support::status_and_json(response).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(body["payload"].as_str().expect("payload")).expect("JSON")
}

async fn resets_and_ends_are_told_once_with_nakamas_arguments(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.leaderboards.boards = vec![NewLeaderboard {
        id: "daily".into(),
        reset_schedule: "0 0 * * *".into(),
        ..Default::default()
    }];
    config.leaderboards.tournaments = vec![
        NewTournament {
            id: "hourly".into(),
            reset_schedule: "0 * * * *".into(),
            duration: 1800,
            start_time: T,
            ..Default::default()
        },
        NewTournament {
            id: "once".into(),
            duration: HOUR,
            start_time: T + 10 * HOUR,
            end_time: T + 13 * HOUR,
            ..Default::default()
        },
    ];
    let (sender, receiver) = mpsc::unbounded_channel();
    let mut functions = Functions::new();
    functions
        .register(
            "tell",
            Tell {
                hooks: Arc::new(Recorder(sender)),
                heard: Mutex::new(receiver),
            },
        )
        .expect("id");
    let server = TestServer::start_with(config, functions).await;

    // 09:30 to 12:00: the hourly tournament resets at each hour and closes at each half hour;
    // the one-off closes for scores an hour after its start (its records expire at its end).
    let first = tell(&server, T + 9 * HOUR + 1800, T + 12 * HOUR).await;
    assert_eq!(
        first["told"],
        json!([
            ["TournamentReset", "hourly", T + 10 * HOUR],
            ["TournamentEnd", "hourly", T + 10 * HOUR + 1800],
            ["TournamentReset", "hourly", T + 11 * HOUR],
            ["TournamentEnd", "once", T + 11 * HOUR],
            ["TournamentEnd", "hourly", T + 11 * HOUR + 1800],
            ["TournamentReset", "hourly", T + 12 * HOUR],
        ]),
    );
    let heard = first["heard"].as_array().expect("heard");
    assert_eq!(heard.len(), 6, "{first}");
    let once_end = heard
        .iter()
        .find(|h| h["id"] == "once")
        .expect("the one-off's end");
    assert_eq!(
        once_end,
        &json!({"hook": "tournament_end", "id": "once", "at": T + 11 * HOUR,
                "end": T + 11 * HOUR, "reset": T + 13 * HOUR})
    );
    let hourly_end = heard
        .iter()
        .find(|h| h["hook"] == "tournament_end" && h["id"] == "hourly")
        .expect("an hourly end");
    assert_eq!(
        hourly_end,
        &json!({"hook": "tournament_end", "id": "hourly", "at": T + 10 * HOUR + 1800,
                "end": T + 10 * HOUR + 1800, "reset": T + 11 * HOUR})
    );
    let hourly_reset = heard
        .iter()
        .find(|h| h["hook"] == "tournament_reset" && h["at"] == T + 11 * HOUR)
        .expect("an hourly reset");
    assert_eq!(
        hourly_reset,
        &json!({"hook": "tournament_reset", "id": "hourly", "at": T + 11 * HOUR,
                "end": T + 10 * HOUR + 1800, "reset": T + 11 * HOUR})
    );

    // The same window again (another node's look): everything is claimed, nothing is told.
    let again = tell(&server, T + 9 * HOUR + 1800, T + 12 * HOUR).await;
    assert_eq!(again["told"], json!([]), "{again}");

    // 12:00 to 13:00: the one-off's records expire at its end; it tells nothing after.
    let end = tell(&server, T + 12 * HOUR, T + 13 * HOUR).await;
    let once: Vec<&Value> = end["heard"]
        .as_array()
        .expect("heard")
        .iter()
        .filter(|h| h["id"] == "once")
        .collect();
    assert_eq!(
        once,
        vec![
            &json!({"hook": "tournament_reset", "id": "once", "at": T + 13 * HOUR,
                     "end": T + 11 * HOUR, "reset": T + 13 * HOUR})
        ]
    );
    let later = tell(&server, T + 13 * HOUR, T + 20 * HOUR).await;
    assert!(
        !later["told"]
            .as_array()
            .expect("told")
            .iter()
            .any(|t| t[1] == "once"),
        "{later}"
    );

    // Midnight: the daily leaderboard resets, told the reset and the next one.
    let midnight = tell(&server, T + 23 * HOUR + 1800, T + 24 * HOUR).await;
    let daily: Vec<&Value> = midnight["heard"]
        .as_array()
        .expect("heard")
        .iter()
        .filter(|h| h["id"] == "daily")
        .collect();
    assert_eq!(
        daily,
        vec![
            &json!({"hook": "leaderboard_reset", "id": "daily", "at": T + 24 * HOUR,
                     "prev_reset": T + 24 * HOUR, "next_reset": T + 48 * HOUR})
        ]
    );
}
