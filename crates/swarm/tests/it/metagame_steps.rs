//! The `storage` and `leaderboard` steps end to end: the real `swarm` binary (2 workers) against
//! a real Muster started in-process. Every call is counted once in the report, exactly as many as
//! the schedule makes; reads find what the writes wrote (the steps check each read, and the test
//! reads the server's objects and records over HTTP after the run); a call Muster refuses fails
//! the players under its own kind.

use serde_json::Value;

use crate::common;
use common::{count, run_swarm, run_swarm_with, Muster};

const PLAYERS: u64 = 10;
/// Calls per player per step: every 0.2 s for 1.1 s.
const CALLS: u64 = 5;

/// Muster with the `scores` leaderboard and values of at most 512 bytes.
fn muster() -> Muster {
    Muster::start_with(|config| {
        config
            .leaderboards
            .boards
            .push(muster::leaderboards::NewLeaderboard {
                id: "scores".into(),
                operator: "best".into(),
                ..Default::default()
            });
        config.storage.max_value_bytes = 512;
    })
}

/// Each player: five writes of its save, five reads of it, five mixed calls over three slots,
/// five scores, five looks around itself. Accounts are `swarm-player-<index>`, so the test can
/// sign in as each player afterwards.
const SCENARIO: &str = r#"
name = "metagame-e2e"
timeout_s = 5
grace_s = 5

[[phases]]
duration_s = 1
players = 10

[[phases]]
duration_s = 9

[[steps]]
do = "authenticate"
reuse_accounts = true

[[steps]]
do = "storage"
interval_s = 0.2
duration_s = 1.1
collection = "saves"
key = "save"
value_bytes = 200
read_ratio = 0

[[steps]]
do = "storage"
interval_s = 0.2
duration_s = 1.1
collection = "saves"
key = "save"
read_ratio = 1

[[steps]]
do = "storage"
interval_s = 0.2
duration_s = 1.1
collection = "slots"
key = "slot"
keys = 3
value_bytes = 64
read_ratio = 0.5

[[steps]]
do = "leaderboard"
interval_s = 0.2
duration_s = 1.1
leaderboard = "scores"
score = [1, 1000]
read_ratio = 0

[[steps]]
do = "leaderboard"
interval_s = 0.2
duration_s = 1.1
leaderboard = "scores"
limit = 5
read_ratio = 1
"#;

/// Blocking calls to Muster as a player would make them.
struct Client {
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
    url: String,
}

impl Client {
    fn new(muster: &Muster) -> Client {
        Client {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
            http: reqwest::Client::new(),
            url: muster.url(),
        }
    }

    /// Signs in with `device` (an existing account) and returns its token and user id.
    fn sign_in(&self, device: &str, create: bool) -> (String, String) {
        let session: Value = self.runtime.block_on(async {
            self.http
                .post(format!(
                    "{}/v2/account/authenticate/device?create={create}",
                    self.url
                ))
                .basic_auth("defaultkey", Some(""))
                .json(&serde_json::json!({ "id": device }))
                .send()
                .await
                .expect("auth")
                .error_for_status()
                .expect("an account")
                .json()
                .await
                .expect("json")
        });
        let token = session["token"].as_str().expect("token").to_string();
        let account: Value = self.get(&token, "/v2/account");
        let user = account["user"]["id"].as_str().expect("user id").to_string();
        (token, user)
    }

    fn get(&self, token: &str, path: &str) -> Value {
        self.runtime.block_on(async {
            self.http
                .get(format!("{}{path}", self.url))
                .bearer_auth(token)
                .send()
                .await
                .expect("get")
                .error_for_status()
                .expect("2xx")
                .json()
                .await
                .expect("json")
        })
    }
}

#[test]
fn storage_and_leaderboard_calls_are_counted_exactly_and_read_what_was_written() {
    let muster = muster();
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, report) = run_swarm(&muster.url(), dir.path(), "metagame", SCENARIO, 2);
    assert_eq!(code, 0, "{}", report["errors"]);
    assert_eq!(report["failed"], 0);
    assert_eq!(report["successful"], PLAYERS);
    assert_eq!(report["errors"], serde_json::json!({}));

    // Every call made once and counted once: writes-only, reads-only, then mixed.
    let (writes, reads) = (
        count(&report, "storage_write"),
        count(&report, "storage_read"),
    );
    assert_eq!(writes + reads, 3 * PLAYERS * CALLS, "{writes} + {reads}");
    assert!(reads >= PLAYERS * CALLS && writes >= PLAYERS * CALLS);
    assert!(
        writes > PLAYERS * CALLS && reads > PLAYERS * CALLS,
        "the mixed step both reads and writes ({writes}, {reads})"
    );
    assert_eq!(count(&report, "leaderboard_write"), PLAYERS * CALLS);
    assert_eq!(count(&report, "leaderboard_around"), PLAYERS * CALLS);
    // One authenticate and 25 calls per player, each sent once and answered once.
    let calls = PLAYERS * (1 + 5 * CALLS);
    assert_eq!(report["counters"]["sends"], calls);
    assert_eq!(report["counters"]["receives"], calls);
    assert_eq!(count(&report, "client_lag"), PLAYERS * 5 * CALLS);

    // What the server holds: each player's save (200 bytes, theirs only) and one record each.
    let client = Client::new(&muster);
    let mut owners = Vec::new();
    for index in 0..PLAYERS {
        let (token, user) = client.sign_in(&format!("swarm-player-{index:010}"), false);
        let saves = client.get(&token, &format!("/v2/storage/saves/{user}?limit=10"));
        let saves = saves["objects"].as_array().expect("objects");
        assert_eq!(saves.len(), 1, "player {index}: {saves:?}");
        assert_eq!(saves[0]["key"], "save");
        assert_eq!(saves[0]["value"].as_str().map(str::len), Some(200));
        let slots = client.get(&token, &format!("/v2/storage/slots/{user}?limit=10"));
        let slots = slots["objects"].as_array().map_or(0, Vec::len);
        assert!(slots <= 3, "player {index}: {slots} slots");
        owners.push(user);
    }
    let (probe, _) = client.sign_in("metagame-probe-0000000", true);
    let board = client.get(&probe, "/v2/leaderboard/scores?limit=100");
    let records = board["records"].as_array().expect("records");
    assert_eq!(records.len() as u64, PLAYERS, "{board}");
    for record in records {
        let owner = record["owner_id"].as_str().expect("owner");
        assert!(owners.iter().any(|o| o == owner), "{record}");
        let score: i64 = record["score"]
            .as_str()
            .expect("score")
            .parse()
            .expect("int");
        assert!((1..=1000).contains(&score), "{record}");
    }
}

/// The same scenario with every call over gRPC (`api = "grpc"`, `--grpc-target`): the same
/// calls counted exactly, the same checks of what was written, and the server counts them as
/// gRPC calls; a refused call fails its players as `<call>_grpc_<code>`.
#[test]
fn the_same_calls_over_grpc_are_counted_exactly() {
    let grpc_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let muster = Muster::start_with(|config| {
        config
            .leaderboards
            .boards
            .push(muster::leaderboards::NewLeaderboard {
                id: "scores".into(),
                operator: "best".into(),
                ..Default::default()
            });
        config.storage.max_value_bytes = 512;
        config.grpc.listen = format!("127.0.0.1:{grpc_port}");
    });
    let grpc_target = format!("127.0.0.1:{grpc_port}");
    let over_grpc = SCENARIO
        .replace(
            "reuse_accounts = true",
            "reuse_accounts = true\napi = \"grpc\"",
        )
        .replace("do = \"storage\"", "do = \"storage\"\napi = \"grpc\"")
        .replace(
            "do = \"leaderboard\"",
            "do = \"leaderboard\"\napi = \"grpc\"",
        );
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, report) = run_swarm_with(
        &muster.url(),
        dir.path(),
        "metagame-grpc",
        &over_grpc,
        2,
        &["--grpc-target", &grpc_target],
    );
    assert_eq!(code, 0, "{}", report["errors"]);
    assert_eq!(report["successful"], PLAYERS);
    let (writes, reads) = (
        count(&report, "storage_write"),
        count(&report, "storage_read"),
    );
    assert_eq!(writes + reads, 3 * PLAYERS * CALLS, "{writes} + {reads}");
    assert_eq!(count(&report, "leaderboard_write"), PLAYERS * CALLS);
    assert_eq!(count(&report, "leaderboard_around"), PLAYERS * CALLS);
    let calls = PLAYERS * (1 + 5 * CALLS);
    assert_eq!(report["counters"]["sends"], calls);
    assert_eq!(report["counters"]["receives"], calls);
    // The server saw them as gRPC calls, and none over REST.
    let client = Client::new(&muster);
    let metrics = client.runtime.block_on(async {
        let answer = client
            .http
            .get(format!("{}/metrics", client.url))
            .send()
            .await;
        answer.expect("metrics").text().await.expect("text")
    });
    let counted = |call: &str, transport: &str| -> u64 {
        let series = format!(
            "muster_api_call_duration_seconds_count{{call=\"{call}\",code=\"OK\",transport=\"{transport}\"}} "
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(counted("WriteStorageObjects", "grpc"), writes);
    assert_eq!(counted("ReadStorageObjects", "grpc"), reads);
    assert_eq!(counted("AuthenticateDevice", "grpc"), PLAYERS);
    assert_eq!(counted("WriteStorageObjects", "rest"), 0);
    // A refused call: no such leaderboard is NOT_FOUND (5).
    let refused = over_grpc.replace(
        "leaderboard = \"scores\"\nscore",
        "leaderboard = \"nope\"\nscore",
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, report) = run_swarm_with(
        &muster.url(),
        dir.path(),
        "refused-grpc",
        &refused,
        2,
        &["--grpc-target", &grpc_target],
    );
    assert_eq!(code, 3);
    assert_eq!(
        report["errors"],
        serde_json::json!({ "leaderboard_write_grpc_5": PLAYERS })
    );
}

#[test]
fn refused_calls_fail_players_by_kind() {
    let muster = muster();
    let cases = [
        // No such leaderboard: 404 on the first submission.
        (
            SCENARIO.replace(
                "leaderboard = \"scores\"\nscore",
                "leaderboard = \"nope\"\nscore",
            ),
            "leaderboard_write_http_404",
        ),
        // A value over the server's 512 bytes: 400 on the first write.
        (
            SCENARIO.replace("value_bytes = 200", "value_bytes = 600"),
            "storage_write_http_400",
        ),
    ];
    for (scenario, kind) in cases {
        let dir = tempfile::tempdir().expect("temp dir");
        let scenario = scenario.replace("reuse_accounts = true", "reuse_accounts = false");
        let (code, report) = run_swarm(&muster.url(), dir.path(), "refused", &scenario, 2);
        assert_eq!(code, 3, "{kind}: failed players make the run fail");
        assert_eq!(report["failed"], PLAYERS, "{kind}");
        assert_eq!(
            report["errors"],
            serde_json::json!({ kind: PLAYERS }),
            "{kind}"
        );
        let metric = kind.trim_end_matches(|c: char| c.is_ascii_digit());
        let metric = metric.trim_end_matches("_http_");
        assert_eq!(
            count(&report, metric),
            0,
            "{kind}: no refused call has a latency"
        );
    }
}

/// The bundled `scenarios/metagame.toml`, with 20 of its 200 players, run as its header says
/// (the `scores` leaderboard, the economy functions opted in): nobody fails, and every call of
/// every step is sent once and counted once.
#[test]
fn bundled_metagame_scenario_runs_clean() {
    let muster = Muster::start_with(|config| {
        config.runtime.player_builtin_functions = config.runtime.builtin_functions.clone();
        config.economy.starting_wallet = [("coins".to_owned(), 1_000_000)].into();
        config
            .leaderboards
            .boards
            .push(muster::leaderboards::NewLeaderboard {
                id: "scores".into(),
                ..Default::default()
            });
    });
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/metagame.toml");
    let text = std::fs::read_to_string(file).expect("scenarios/metagame.toml");
    assert!(text.contains("players = 200\n"));
    let text = text.replace("players = 200\n", "players = 20\n");
    let dir = tempfile::tempdir().expect("temp dir");
    let (code, report) = run_swarm(&muster.url(), dir.path(), "metagame", &text, 2);
    assert_eq!(code, 0, "{}", report["errors"]);
    assert_eq!(report["successful"], 20);
    let metrics = [
        "rpc_wallet_spend",
        "rpc_inventory_grant",
        "storage_write",
        "storage_read",
        "leaderboard_write",
        "leaderboard_around",
    ];
    for metric in metrics {
        assert!(
            count(&report, metric) > 0,
            "{metric}: {}",
            report["metrics"]
        );
    }
    let calls: u64 = metrics.iter().map(|m| count(&report, m)).sum();
    // Per player: authenticate, connect and the closing handshake, then every call.
    assert_eq!(report["counters"]["sends"], 3 * 20 + calls);
    assert_eq!(count(&report, "client_lag"), calls);
}
