//! The persistent world inside Muster (docs/world.md): the real binary seeds its shards from
//! the Helsinki extract, ticks them, checkpoints them on an interval and at shutdown, restores
//! them after a kill -9, and `muster world seed|stats` work offline.

use crate::support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use muster_proto::realtime::{self as rt, Envelope, Message as Kind};
use serde_json::{json, Value};
use support::{
    eventually, free_port, muster_command, Backend, Binary, Client, Database, TestServer,
};
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::Message;

fn helsinki_pbf() -> PathBuf {
    muster_world::testdata::helsinki_extract()
}

/// A world of 2 shards of 10 Helsinki tiles, 1,000 NPC towers each, checkpointed every second.
/// (Its players act faster than the default rate limit allows; the limit has a test of its own.)
fn world_toml(db: &Database) -> PathBuf {
    world_toml_with(db, "")
}

/// [`world_toml`] with more `[world]` settings.
fn world_toml_with(db: &Database, more: &str) -> PathBuf {
    world_settings(
        db,
        &format!(
            "shards = 2\ntiles_per_shard = 10\ncheckpoint_interval_s = 1\nseed_towers_per_shard = 1000\nactions_per_sec = 0\n{more}"
        ),
    )
}

/// A configuration of Helsinki's world with exactly `settings` under `[world]` (each line
/// `key = value`); its players start with 1,000,000 coins (world actions cost coins).
fn world_settings(db: &Database, settings: &str) -> PathBuf {
    let path = db.data_dir().join("world.toml");
    std::fs::create_dir_all(db.data_dir()).expect("dir");
    let map = helsinki_pbf().display().to_string();
    std::fs::write(&path, format!("[economy]\nstarting_wallet = {{ coins = 1000000 }}\n[world]\nmap = {map:?}\n{settings}")).expect("config");
    path
}

/// The real binary on `db` with `config`, once it answers.
async fn start_world(db: &Database, config: &PathBuf) -> Binary {
    let mut command = muster_command(db);
    command.arg("--config").arg(config);
    Binary::run(command, free_port()).await
}

fn world_command(db: &Database, config: &PathBuf, args: &[&str]) -> (i32, String, String) {
    let out = muster_command(db)
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("run muster");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stats(db: &Database, config: &PathBuf) -> serde_json::Value {
    let (code, out, err) = world_command(db, config, &["world", "stats"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("stats JSON")
}

async fn metric(node: &Binary, name: &str) -> f64 {
    support::metric_at(&node.base(), name).await
}

#[tokio::test]
async fn shards_tick_checkpoint_and_come_back_after_a_kill_9() {
    let db = Database::new(Backend::Sqlite).await;
    let config = world_toml(&db);
    let mut node = start_world(&db, &config).await;
    assert_eq!(metric(&node, "muster_world_shards").await, 2.0);
    assert_eq!(metric(&node, "muster_world_shards_restored").await, 0.0);
    assert_eq!(
        metric(&node, "muster_world_towers{shard=\"0\"}").await,
        1000.0
    );
    assert_eq!(
        metric(&node, "muster_world_creeps{shard=\"1\"}").await,
        2000.0
    );
    // Ticking, and checkpointed at least twice per shard.
    eventually("two checkpoints of each shard", || async {
        metric(&node, "muster_world_checkpoints_total{result=\"ok\"}").await >= 4.0
    })
    .await;
    assert!(metric(&node, "muster_world_tick_seconds_count").await > 10.0);
    node.kill9();
    let after_kill = stats(&db, &config);
    let shards = after_kill["shards"].as_array().expect("shards");
    assert_eq!(shards.len(), 2);
    for s in shards {
        assert_eq!(s["towers"], 1000, "{s}");
        assert_eq!(s["creeps"], 2000, "{s}");
        assert!(s["tickNo"].as_u64().unwrap_or(0) > 0, "{s}");
    }
    // Restarted on the same data: restored, not seeded again, and time goes on from the
    // checkpoint.
    let node = start_world(&db, &config).await;
    assert_eq!(metric(&node, "muster_world_shards_restored").await, 2.0);
    assert_eq!(
        metric(&node, "muster_world_towers{shard=\"0\"}").await,
        1000.0
    );
    eventually("a checkpoint after the restart", || async {
        metric(&node, "muster_world_checkpoints_total{result=\"ok\"}").await >= 2.0
    })
    .await;
    // A graceful stop writes each shard's last checkpoint.
    let pid = node.child.id();
    assert!(Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .expect("kill")
        .success());
    let mut node = node;
    let mut wait = support::Wait::new("muster to stop", support::EVENTUALLY);
    while node.child.try_wait().expect("wait").is_none() {
        wait.tick().await;
    }
    let after_stop = stats(&db, &config);
    // Checkpoints let the action log's covered segments go: a few files, not one per second.
    let segments = std::fs::read_dir(db.data_dir().join("world"))
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("shard-0.log."))
        })
        .count();
    assert!((1..=2).contains(&segments), "{segments} log segments");
    for (before, after) in shards
        .iter()
        .zip(after_stop["shards"].as_array().expect("shards"))
    {
        assert!(
            after["tickNo"].as_u64() > before["tickNo"].as_u64()
                && after["nowMs"].as_u64() > before["nowMs"].as_u64(),
            "{before} → {after}"
        );
    }
}

#[tokio::test]
async fn world_seed_writes_checkpoints_and_refuses_to_overwrite() {
    let db = Database::new(Backend::Sqlite).await;
    let config = world_toml(&db);
    let (code, out, err) = world_command(&db, &config, &["world", "seed"]);
    assert_eq!(code, 0, "{err}");
    let seeded: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(seeded["shards"][1]["towers"], 1000, "{seeded}");
    assert_eq!(seeded["buildingsPerTile"], 433);
    let (code, _, err) = world_command(&db, &config, &["world", "seed"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("already seeded (--force replaces it)"),
        "{err}"
    );
    let (code, _, err) = world_command(&db, &config, &["world", "seed", "--force"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(stats(&db, &config)["shards"][0]["towers"], 1000);
    // Seeded by population instead: shard N seeds the Nth bundled city (Tokyo, 13,960,000
    // inhabitants, then Delhi, 11,030,000) at 20 towers per million.
    std::fs::write(
        &config,
        format!(
            "[world]\nmap = {:?}\nshards = 2\ntiles_per_shard = 10\nseed_towers_per_million = 20.0\n",
            helsinki_pbf().display().to_string()
        ),
    )
    .expect("config");
    let (code, out, err) = world_command(&db, &config, &["world", "seed", "--force"]);
    assert_eq!(code, 0, "{err}");
    let by_city: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(by_city["shards"][0]["city"], "Tokyo", "{by_city}");
    assert_eq!(by_city["shards"][0]["towers"], 279, "{by_city}");
    assert_eq!(by_city["shards"][1]["towers"], 221, "{by_city}");
    assert_eq!(by_city["shards"][1]["creeps"], 442, "{by_city}");
    // A damaged checkpoint is refused with the reason, by `stats` and at start.
    let file = db.data_dir().join("world/shard-0.world");
    let mut bytes = std::fs::read(&file).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&file, bytes).expect("write");
    let (code, _, err) = world_command(&db, &config, &["world", "stats"]);
    assert_eq!(code, 2);
    assert!(err.contains("checksum mismatch"), "{err}");
    // A bad setting is named.
    std::fs::write(&config, "[world]\nmap = \"/nonexistent.osm.pbf\"\n").expect("config");
    let (code, _, err) = world_command(&db, &config, &["world", "seed"]);
    assert_eq!(code, 2);
    assert!(err.contains("world.map"), "{err}");
}

/// An in-process Muster with a one-shard world of Helsinki (200 NPC towers, 400 creeps),
/// updating areas of interest 5 times a second; and a 1.8 km box at the map's centre.
async fn world_server() -> (Database, TestServer, Value) {
    let db = Database::new(Backend::Sqlite).await;
    let mut config = db.config();
    config.world.map = helsinki_pbf().display().to_string();
    config.world.seed_towers_per_shard = 200;
    config.world.checkpoint_dir = db.data_dir().join("world").display().to_string();
    let server = TestServer::start(config).await;
    let (cx, cy) = map_centre();
    let area = json!({"shard": 0, "min_x": cx - 900.0, "min_y": cy - 900.0,
                      "max_x": cx + 900.0, "max_y": cy + 900.0});
    (db, server, area)
}

/// The centre of the Helsinki map's plane (a shard's first tile), metres.
fn map_centre() -> (f32, f32) {
    let map = muster_world::map::osm::import(&helsinki_pbf()).expect("map");
    (
        (map.bounds.min.x + map.bounds.max.x) / 2.0,
        (map.bounds.min.y + map.bounds.max.y) / 2.0,
    )
}

fn inside(item: &Value, area: &Value, margin: f64) -> bool {
    let (x, y) = (
        item["x"].as_f64().unwrap_or(f64::NAN),
        item["y"].as_f64().unwrap_or(f64::NAN),
    );
    x >= area["min_x"].as_f64().unwrap_or(0.0) - margin
        && x <= area["max_x"].as_f64().unwrap_or(0.0) + margin
        && y >= area["min_y"].as_f64().unwrap_or(0.0) - margin
        && y <= area["max_y"].as_f64().unwrap_or(0.0) + margin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_subscribes_to_an_area_and_gets_a_snapshot_then_deltas() {
    let (_db, server, area) = world_server().await;
    let mut alice = Client::connect(&server, "world-alice").await;
    let snapshot = alice
        .ok("world_subscribe", area.clone(), "world_state")
        .await;
    assert_eq!(snapshot["snapshot"], true, "{snapshot}");
    let towers = snapshot["towers"].as_array().cloned().unwrap_or_default();
    let creeps = snapshot["creeps"].as_array().cloned().unwrap_or_default();
    assert!(!towers.is_empty() && !creeps.is_empty(), "{snapshot}");
    assert!(
        towers.iter().chain(&creeps).all(|i| inside(i, &area, 0.0)),
        "{snapshot}"
    );
    assert_eq!(
        support::metric(&server, "muster_world_subscribers").await,
        1.0
    );
    // Then changes, unasked: creeps in view with new positions, towers only when they change.
    let delta = alice.event("world_state").await;
    assert_eq!(delta["snapshot"], false, "{delta}");
    assert!(
        delta["tick"].as_u64() > snapshot["tick"].as_u64(),
        "{delta}"
    );
    let moved = delta["creeps"].as_array().cloned().unwrap_or_default();
    assert!(moved.iter().all(|c| inside(c, &area, 50.0)), "{delta}");
    let before: std::collections::HashMap<u64, (f64, f64)> = creeps
        .iter()
        .map(|c| {
            (
                c["id"].as_u64().unwrap_or(0),
                (
                    c["x"].as_f64().unwrap_or(0.0),
                    c["y"].as_f64().unwrap_or(0.0),
                ),
            )
        })
        .collect();
    assert!(
        moved.iter().any(|c| before
            .get(&c["id"].as_u64().unwrap_or(0))
            .is_some_and(|p| *p
                != (
                    c["x"].as_f64().unwrap_or(0.0),
                    c["y"].as_f64().unwrap_or(0.0)
                ))),
        "no creep moved: {delta}"
    );
    // Bad requests are refused with the reason, and change nothing.
    let mut big = area.clone();
    big["max_x"] = json!(area["min_x"].as_f64().unwrap_or(0.0) + 5_000.0);
    let (code, message, _) = alice.refused("world_subscribe", big).await;
    assert_eq!(code, 3);
    assert!(message.contains("larger than"), "{message}");
    let mut elsewhere = area.clone();
    elsewhere["shard"] = json!(7);
    let (_, message, _) = alice.refused("world_subscribe", elsewhere).await;
    assert!(message.contains("no shard 7"), "{message}");
    let mut inverted = area.clone();
    inverted["max_x"] = json!(area["min_x"].as_f64().unwrap_or(0.0) - 1.0);
    alice.refused("world_subscribe", inverted).await;
    // A subscription without its box (or with one of no area) is refused, not served an empty
    // view at the origin.
    let (code, message, _) = alice.refused("world_subscribe", json!({"shard": 0})).await;
    assert_eq!(code, 3);
    assert!(message.contains("min < max"), "{message}");
    alice.event("world_state").await;
    // Unsubscribed: no more states.
    alice.call("world_unsubscribe", json!({})).await;
    eventually("the subscription gone", || async {
        support::metric(&server, "muster_world_subscribers").await == 0.0
    })
    .await;
    alice.sync().await;
    alice.take("world_state");
    tokio::time::sleep(Duration::from_millis(600)).await;
    alice.sync().await;
    assert!(
        alice.take("world_state").is_empty(),
        "states after unsubscribing"
    );
    // A protobuf socket gets the same kind of state, binary.
    let (token, _) = server.device_session("device-world-bob").await;
    let (mut binary, _) = connect_async(server.ws_url(&format!("token={token}&format=protobuf")))
        .await
        .expect("connect");
    let subscribe = Envelope::new(
        "9",
        Kind::WorldSubscribe(rt::WorldSubscribe {
            shard: 0,
            min_x: area["min_x"].as_f64().unwrap_or(0.0) as f32,
            min_y: area["min_y"].as_f64().unwrap_or(0.0) as f32,
            max_x: area["max_x"].as_f64().unwrap_or(0.0) as f32,
            max_y: area["max_y"].as_f64().unwrap_or(0.0) as f32,
        }),
    );
    binary
        .send(Message::binary(rt::encode_protobuf(&subscribe)))
        .await
        .expect("send");
    let states = protobuf_states(&mut binary, 2).await;
    assert_eq!(states[0].0, "9");
    assert!(states[0].1.snapshot && !states[0].1.towers.is_empty());
    assert!(!states[1].1.snapshot && states[1].0.is_empty());
}

/// The next `count` world states a protobuf socket receives, with their `cid`s.
async fn protobuf_states<S>(socket: &mut S, count: usize) -> Vec<(String, rt::WorldState)>
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let mut states = Vec::new();
    while states.len() < count {
        match tokio::time::timeout(Duration::from_secs(10), socket.next()).await {
            Ok(Some(Ok(Message::Binary(bytes)))) => {
                let envelope = rt::decode_protobuf(&bytes).expect("protobuf");
                if let Some(Kind::WorldState(state)) = envelope.message {
                    states.push((envelope.cid, state));
                }
            }
            Ok(Some(Ok(_))) => continue,
            other => panic!("no world_state over protobuf: {other:?}"),
        }
    }
    states
}

#[tokio::test]
async fn without_a_world_subscriptions_are_refused() {
    let db = Database::new(Backend::Sqlite).await;
    let server = TestServer::start(db.config()).await;
    let mut alice = Client::connect(&server, "no-world").await;
    let (code, message, _) = alice
        .refused(
            "world_subscribe",
            json!({"shard": 0, "max_x": 10.0, "max_y": 10.0}),
        )
        .await;
    assert_eq!(code, 3);
    assert!(message.contains("not enabled"), "{message}");
}

/// `POST /v2/rpc/{id}` with a session token and a JSON payload: the status and the answer
/// (the function's JSON on success, the error body otherwise).
async fn rpc(base: &str, token: &str, id: &str, payload: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/v2/rpc/{id}"))
        .bearer_auth(token)
        .json(&Value::String(payload.to_string()))
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("JSON");
    if status == 200 {
        let payload = body["payload"].as_str().expect("payload").to_owned();
        return (status, serde_json::from_str(&payload).expect("JSON answer"));
    }
    (status, body)
}

/// The player of `token` claims buildings until two of theirs are joined by a road; returns
/// the first tower of the pair, the route, and how many towers they claimed.
async fn claim_a_road(base: &str, token: &str) -> (u64, u64, usize) {
    let (home, route, claimed, _) = claim_a_road_measured(base, token).await;
    (home, route, claimed)
}

/// [`claim_a_road`], with the route's length in metres.
async fn claim_a_road_measured(base: &str, token: &str) -> (u64, u64, usize, f64) {
    let mut mine: Vec<u64> = Vec::new();
    for building in 0..433 {
        let (status, answer) = rpc(base, token, "world_claim", json!({"building": building})).await;
        if status == 409 {
            continue; // an NPC's
        }
        assert_eq!(status, 200, "{answer}");
        let tower = answer["tower"].as_u64().expect("tower");
        for &other in &mine {
            let (status, answer) = rpc(
                base,
                token,
                "world_connect",
                json!({"from": other, "to": tower}),
            )
            .await;
            if status == 200 {
                return (
                    other,
                    answer["route"].as_u64().expect("route"),
                    mine.len() + 1,
                    answer["length_m"].as_f64().expect("length"),
                );
            }
        }
        mine.push(tower);
    }
    panic!("no two claimable buildings joined by a road");
}

async fn coins(base: &str, token: &str) -> i64 {
    let wallet: Value = reqwest::Client::new()
        .get(format!("{base}/v2/economy/wallet"))
        .bearer_auth(token)
        .send()
        .await
        .expect("wallet")
        .json()
        .await
        .expect("JSON");
    wallet["wallet"]["coins"]
        .as_i64()
        .or_else(|| wallet["coins"].as_i64())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_players_creeps_that_arrive_pay_into_the_wallet() {
    let db = Database::new(Backend::Sqlite).await;
    let config = world_toml(&db);
    let node = start_world(&db, &config).await;
    let base = node.base();
    let (alice, _) = support::device_session_at(&base, "device-world-payee").await;
    let (_, route, _) = claim_a_road(&base, &alice).await;
    let (status, answer) = rpc(
        &base,
        &alice,
        "world_spawn",
        json!({"route": route, "count": 5, "speed": 100.0}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let before = coins(&base, &alice).await;
    // At 100 m/s a route across central Helsinki takes seconds.
    let paid =
        || async { metric(&node, "muster_world_payouts_total{result=\"paid\"}").await >= 1.0 };
    support::eventually_within("an arrival paid", Duration::from_secs(30), paid).await;
    let after = coins(&base, &alice).await;
    assert!(after > before, "wallet {before} → {after}");
    // Each payment is a ledger row of its own.
    let ledger: Value = reqwest::Client::new()
        .get(format!("{base}/v2/economy/ledger?limit=100"))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("ledger")
        .json()
        .await
        .expect("JSON");
    assert!(ledger.to_string().contains("world_arrival"), "{ledger}");
}

#[tokio::test]
async fn acknowledged_actions_survive_a_kill_9_before_any_checkpoint() {
    let db = Database::new(Backend::Sqlite).await;
    // No checkpoint for an hour: after the kill, everything comes back from the action log.
    let config = world_settings(
        &db,
        "checkpoint_interval_s = 3600\nseed_towers_per_shard = 50\nactions_per_sec = 0\n",
    );
    let start = || start_world(&db, &config);
    let mut node = start().await;
    let base = node.base();
    let (alice, _) = support::device_session_at(&base, "device-world-alice").await;
    let (bob, _) = support::device_session_at(&base, "device-world-bob").await;
    let (home, route, claimed) = claim_a_road(&base, &alice).await;
    let (status, answer) = rpc(&base, &alice, "world_upgrade", json!({"tower": home})).await;
    assert_eq!(
        (status, answer["level"].as_u64()),
        (200, Some(2)),
        "{answer}"
    );
    let (status, answer) = rpc(
        &base,
        &alice,
        "world_spawn",
        json!({"route": route, "count": 3}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["creeps"].as_array().map(Vec::len), Some(3));
    // Refusals change nothing and say why.
    let (status, body) = rpc(&base, &bob, "world_upgrade", json!({"tower": home})).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["message"].as_str().unwrap_or("").contains("not yours"),
        "{body}"
    );
    let (status, _) = rpc(&base, &bob, "world_claim", json!({"building": 99_999})).await;
    assert_eq!(status, 404);
    let (status, _) = rpc(
        &base,
        &alice,
        "world_spawn",
        json!({"route": route, "count": 1000}),
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = rpc(
        &base,
        &alice,
        "world_claim",
        json!({"building": 1, "colour": "red"}),
    )
    .await;
    assert_eq!(status, 400);
    let towers = 50.0 + claimed as f64;
    eventually("Alice's towers counted", || async {
        metric(&node, "muster_world_towers{shard=\"0\"}").await == towers
    })
    .await;
    // kill -9, then back: the seeded world again, and Alice's actions replayed from the log.
    node.kill9();
    let node = start().await;
    let base = node.base();
    assert_eq!(
        metric(&node, "muster_world_towers{shard=\"0\"}").await,
        towers
    );
    let (status, answer) = rpc(&base, &alice, "world_upgrade", json!({"tower": home})).await;
    assert_eq!(
        (status, answer["level"].as_u64()),
        (200, Some(3)),
        "{answer}"
    );
    let (status, body) = rpc(&base, &bob, "world_upgrade", json!({"tower": home})).await;
    assert_eq!(status, 403, "{body}");
    let (status, answer) = rpc(
        &base,
        &alice,
        "world_spawn",
        json!({"route": route, "count": 1}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    // Stopped, `muster world checkpoint` folds the log into a checkpoint...
    let mut node = node;
    node.kill9();
    let (code, out, err) = world_command(&db, &config, &["world", "checkpoint"]);
    assert_eq!(code, 0, "{err}");
    let folded: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(folded["shards"][0]["restored"], false, "{folded}");
    assert!(
        folded["shards"][0]["actionsReplayed"].as_u64() >= Some(6),
        "{folded}"
    );
    assert_eq!(
        folded["shards"][0]["towers"].as_f64(),
        Some(towers),
        "{folded}"
    );
    // ...which the next start restores, with nothing left to replay.
    let (code, out, err) = world_command(&db, &config, &["world", "checkpoint"]);
    assert_eq!(code, 0, "{err}");
    let again: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(again["shards"][0]["restored"], true, "{again}");
    assert_eq!(again["shards"][0]["actionsReplayed"], 0, "{again}");
}

/// The reasons of the ledger rows of `token`'s account, newest first.
async fn ledger_reasons(base: &str, token: &str) -> Vec<String> {
    support::ledger_at(&reqwest::Client::new(), base, token)
        .await
        .iter()
        .map(|e| e["reason"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn world_actions_cost_what_the_rules_say_and_are_bounded_per_player() {
    let db = Database::new(Backend::Sqlite).await;
    let config = world_toml_with(
        &db,
        "[world.rules]\nupgrade_cost = 400000\nmax_creeps_per_player = 4\n",
    );
    let node = start_world(&db, &config).await;
    let base = node.base();
    let (alice, _) = support::device_session_at(&base, "device-world-buyer").await;
    let (bob, _) = support::device_session_at(&base, "device-world-thief").await;
    let start = coins(&base, &alice).await;
    let bob_start = coins(&base, &bob).await;

    // Each claim costs claim_cost (100), in the ledger as world_claim.
    let (home, route, claimed, length_m) = claim_a_road_measured(&base, &alice).await;
    let after_claims = coins(&base, &alice).await;
    assert_eq!(after_claims, start - 100 * claimed as i64);
    let reasons = ledger_reasons(&base, &alice).await;
    assert_eq!(
        reasons.iter().filter(|r| *r == "world_claim").count(),
        claimed
    );

    // Another player's route is not Bob's to send creeps along; nothing is charged.
    let (status, body) = rpc(&base, &bob, "world_spawn", json!({"route": route})).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("tower of yours"),
        "{body}"
    );
    assert_eq!(coins(&base, &bob).await, bob_start);

    // A creep costs spawn_cost_per_km (10) per kilometre of its route, rounded up.
    let per_creep = ((length_m / 1000.0 * 10.0).ceil() as i64).max(1);
    let (status, body) = rpc(
        &base,
        &alice,
        "world_spawn",
        json!({"route": route, "count": 3, "speed": 1.0}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let after_spawn = coins(&base, &alice).await;
    assert_eq!(after_spawn, after_claims - 3 * per_creep);
    // Past the bound of creeps on the road: refused, nothing charged, nothing spawned.
    let (status, body) = rpc(
        &base,
        &alice,
        "world_spawn",
        json!({"route": route, "count": 2, "speed": 1.0}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"].as_str().unwrap_or("").contains("at most 4"),
        "{body}"
    );
    assert_eq!(coins(&base, &alice).await, after_spawn);

    // An upgrade costs upgrade_cost per level reached; one Alice cannot afford is refused.
    let (status, body) = rpc(&base, &alice, "world_upgrade", json!({"tower": home})).await;
    assert_eq!((status, body["level"].as_u64()), (200, Some(2)), "{body}");
    let after_upgrade = coins(&base, &alice).await;
    assert_eq!(after_upgrade, after_spawn - 800_000);
    let (status, body) = rpc(&base, &alice, "world_upgrade", json!({"tower": home})).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("Insufficient"),
        "{body}"
    );
    assert_eq!(coins(&base, &alice).await, after_upgrade);

    // Two players racing for one building: one gets it and pays; the other is refused and, if
    // it had paid already, refunded (a world_refund row).
    let (carol, _) = support::device_session_at(&base, "device-world-carol").await;
    let (dave, _) = support::device_session_at(&base, "device-world-dave").await;
    let (carol_start, dave_start) = (coins(&base, &carol).await, coins(&base, &dave).await);
    let mut won = (0, 0);
    for building in 200..260 {
        let payload = json!({"building": building});
        let (c, d) = tokio::join!(
            rpc(&base, &carol, "world_claim", payload.clone()),
            rpc(&base, &dave, "world_claim", payload.clone())
        );
        match (c.0, d.0) {
            (200, 409) => won.0 += 1,
            (409, 200) => won.1 += 1,
            (409, 409) => {} // an NPC's
            other => panic!("building {building}: {other:?} {c:?} {d:?}"),
        }
    }
    eventually("the losers' refunds are paid", || async {
        coins(&base, &carol).await == carol_start - 100 * won.0
            && coins(&base, &dave).await == dave_start - 100 * won.1
    })
    .await;
    for token in [&carol, &dave] {
        let reasons = ledger_reasons(&base, token).await;
        let paid = reasons.iter().filter(|r| *r == "world_claim").count();
        let refunded = reasons.iter().filter(|r| *r == "world_refund").count();
        let kept = if token == &carol { won.0 } else { won.1 };
        assert_eq!(paid - refunded, kept as usize, "{reasons:?}");
    }
}

#[tokio::test]
async fn a_players_world_actions_are_rate_limited() {
    let db = Database::new(Backend::Sqlite).await;
    let config = world_settings(&db, "actions_per_sec = 1\naction_burst = 3\n");
    let node = start_world(&db, &config).await;
    let base = node.base();
    let (alice, _) = support::device_session_at(&base, "device-world-hasty").await;
    let (bob, _) = support::device_session_at(&base, "device-world-calm").await;
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(
            rpc(&base, &alice, "world_claim", json!({"building": 99_999}))
                .await
                .0,
        );
    }
    // The burst, then refusals (429) while the bucket refills at one a second.
    assert_eq!(&statuses[..3], &[404, 404, 404], "{statuses:?}");
    assert!(statuses[3..].contains(&429), "{statuses:?}");
    let (status, body) = rpc(&base, &alice, "world_claim", json!({"building": 99_999})).await;
    if status == 429 {
        assert_eq!(body["code"], 8, "{body}");
    }
    // Another player has a bucket of their own.
    assert_eq!(
        rpc(&base, &bob, "world_claim", json!({"building": 99_999}))
            .await
            .0,
        404
    );
}

/// The arrivals' credits when the database is away: retried, never dropped, and — through the
/// action log — not lost to a kill -9 either; each arrival paid exactly once.
#[tokio::test]
#[ignore = "needs PostgreSQL"]
async fn credits_survive_the_database_away_and_a_kill_9() {
    support::postgres_url();
    let postgres = support::PrivatePostgres::start().expect("PostgreSQL's binaries are installed");
    let db = Database {
        dir: tempfile::tempdir().expect("dir"),
        url: postgres.url(),
    };
    let config = world_toml(&db);
    let start = || start_world(&db, &config);
    let mut node = start().await;
    let base = node.base();
    let (alice, _) = support::device_session_at(&base, "device-world-credits").await;
    let (_, route, _, length_m) = claim_a_road_measured(&base, &alice).await;
    // Five creeps that arrive about two seconds from now.
    let speed = (length_m / 2.0).clamp(1.0, 100.0);
    let (status, body) = rpc(
        &base,
        &alice,
        "world_spawn",
        json!({"route": route, "count": 5, "speed": speed}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    postgres.stop_immediate();
    // They arrive while the database is away: their credits are tried, and kept.
    let retried =
        || async { metric(&node, "muster_world_payouts_total{result=\"retried\"}").await >= 1.0 };
    let within = Duration::from_secs(30);
    support::eventually_within("an arrival while the database was away", within, retried).await;
    assert_eq!(metric(&node, "muster_world_payouts_waiting").await, 5.0);
    // The server dies before it could pay; the database comes back; the server starts again.
    node.kill9();
    postgres.start_again();
    let node = start().await;
    let base = node.base();
    eventually("every arrival paid", || async {
        ledger_reasons(&base, &alice)
            .await
            .iter()
            .filter(|r| *r == "world_arrival")
            .count()
            >= 5
    })
    .await;
    eventually("nothing left waiting", || async {
        metric(&node, "muster_world_payouts_waiting").await == 0.0
    })
    .await;
    let arrivals = ledger_reasons(&base, &alice)
        .await
        .iter()
        .filter(|r| *r == "world_arrival")
        .count();
    assert_eq!(arrivals, 5, "each arrival paid exactly once");
}

/// A disk of the test's own (the power-cut disk, whose writes a test can make fail), mounted
/// in a fresh directory.
fn test_disk() -> (tempfile::TempDir, powercut::Disk) {
    support::require_fuse();
    let work = tempfile::tempdir().expect("dir");
    let (backing, mnt) = (work.path().join("backing"), work.path().join("mnt"));
    for dir in [&backing, &mnt] {
        std::fs::create_dir(dir).expect("dir");
    }
    let disk = powercut::Disk::mount(&backing, &mnt).expect("mount");
    (work, disk)
}

/// The action log's disk fills up: the action is refused and applied nowhere (a retry applies
/// it once), its price refunded; once there is room again actions go on, and after a kill -9
/// the world holds exactly what was acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs FUSE"]
async fn an_action_the_log_cannot_take_is_refused_and_not_applied() {
    let (_work, disk) = test_disk();
    let db = Database::new(Backend::Sqlite).await;
    // The world's checkpoints and action log on the test's disk (no checkpoint while it runs);
    // the database elsewhere.
    let config = world_settings(
        &db,
        &format!(
            "checkpoint_dir = {:?}\ncheckpoint_interval_s = 3600\nseed_towers_per_shard = 50\nactions_per_sec = 0\n",
            disk.mountpoint().display().to_string()
        ),
    );
    let start = || start_world(&db, &config);
    let mut node = start().await;
    let base = node.base();
    let (alice, _) = support::device_session_at(&base, "device-world-full-disk").await;
    let (bob, _) = support::device_session_at(&base, "device-world-other").await;
    // A building nobody holds (an NPC's answers 409).
    let mut first = 0;
    for building in 0..433 {
        let (status, body) = rpc(&base, &alice, "world_claim", json!({"building": building})).await;
        match status {
            200 => {
                first = building;
                break;
            }
            409 => continue,
            _ => panic!("{body}"),
        }
    }
    let towers = |node: &Binary| {
        let base = node.base();
        async move { support::metric_at(&base, "muster_world_towers{shard=\"0\"}").await }
    };
    // 50 seeded towers and Alice's (the gauge follows the shard tick by tick).
    let before = 51.0;
    eventually("Alice's tower counted", || async {
        towers(&node).await == before
    })
    .await;
    let wallet = coins(&base, &alice).await;

    // The disk fills up. The next free building's claim passes its quote (is paid for), is
    // applied on the shard, then cannot be logged: refused (503), with nothing of it kept.
    disk.set_full(true);
    let mut second = None;
    let mut refusal = Value::Null;
    for building in first + 1..433 {
        let (status, body) = rpc(&base, &alice, "world_claim", json!({"building": building})).await;
        match status {
            409 => continue,
            503 => {
                (second, refusal) = (Some(building), body);
                break;
            }
            _ => panic!("{status} {body}"),
        }
    }
    let second = second.expect("a free building");
    let body = refusal;
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("not applied"),
        "{body}"
    );
    eventually("the refused claim's price refunded", || async {
        coins(&base, &alice).await == wallet
    })
    .await;
    assert_eq!(metric(&node, "muster_world_log_failures_total").await, 1.0);

    // Room again: the same claim goes through (had the refused one stayed applied, this would
    // be "already claimed"), once.
    disk.set_full(false);
    let (status, body) = rpc(&base, &alice, "world_claim", json!({"building": second})).await;
    assert_eq!(status, 200, "{body}");
    eventually("the claim counted", || async {
        towers(&node).await == before + 1.0
    })
    .await;
    // After a kill -9, the world holds what was acknowledged, and no torn record was left.
    node.kill9();
    let node = start().await;
    assert_eq!(towers(&node).await, before + 1.0);
    let base = node.base();
    for building in [first, second] {
        let (status, _) = rpc(&base, &bob, "world_claim", json!({"building": building})).await;
        assert_eq!(status, 409, "building {building} is Alice's");
    }
    assert_eq!(
        metric(&node, "muster_world_log_damage_total{kind=\"torn_tail\"}").await,
        0.0
    );
}

/// A node of the clustered world `prefix`: its own data folder on `db`, the world's settings of
/// `config` (the shared checkpoint folder among them), beating every 100 ms.
fn world_node(db: &Database, config: &PathBuf, nats: &str, prefix: &str, name: &str) -> Command {
    let mut command = support::cluster_node_command(db, nats, prefix, name);
    command.arg("--config").arg(config);
    command
}

/// Which of `nodes` runs `shard`, and at which epoch.
async fn owner_of(nodes: &[Option<Binary>], shard: u32) -> Option<(usize, f64)> {
    let name = format!("muster_world_shard_epoch{{shard=\"{shard}\"}}");
    let mut owners = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        if let Some(node) = node {
            let epoch = metric(node, &name).await;
            if epoch > 0.0 {
                owners.push((i, epoch));
            }
        }
    }
    assert!(
        owners.len() <= 1,
        "shard {shard} runs on two nodes: {owners:?}"
    );
    owners.pop()
}

/// Claims the first free building of `shard` through `base`; the building and its tower.
async fn claim_in(base: &str, token: &str, shard: u32) -> (u64, u64) {
    for building in 0..433u64 {
        let payload = json!({"shard": shard, "building": building});
        let (status, answer) = rpc(base, token, "world_claim", payload).await;
        if status == 409 {
            continue; // an NPC's, or another player's
        }
        assert_eq!(status, 200, "{answer}");
        return (building, answer["tower"].as_u64().expect("tower"));
    }
    panic!("no free building in shard {shard}");
}

/// Reads `client`'s world states until a snapshot; its tower ids.
async fn next_snapshot(client: &mut Client) -> Vec<u64> {
    for _ in 0..200 {
        let state = client.event("world_state").await;
        if state["snapshot"] == true {
            return state["towers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["id"].as_u64())
                .collect();
        }
    }
    panic!("no fresh snapshot");
}

/// SIGTERM: the node drains (its shards' last checkpoints, their leases released) and exits.
fn drain(node: &mut Binary) {
    let sent = Command::new("kill")
        .args(["-TERM", &node.child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(sent.success());
    node.child.wait().expect("exits");
}

/// The world's shards spread over three nodes on one PostgreSQL and NATS, a volume shared by
/// all: a player on a node that does not run a shard subscribes to it and claims in it; its
/// node is killed with -9 and the shard resumes elsewhere with the claim, the subscription
/// going on with a fresh snapshot; a drained node's shard moves with its claim; and the
/// shards' terms never overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs NATS and PostgreSQL"]
async fn a_world_spreads_over_nodes_and_its_shards_move_without_losing_a_claim() {
    let nats = support::nats_url();
    support::postgres_url();
    let pg = Database::new(Backend::Postgres).await;
    let shared = tempfile::tempdir().expect("shared volume");
    let config = shared.path().join("world.toml");
    let map = helsinki_pbf().display().to_string();
    let volume = shared.path().join("world").display().to_string();
    std::fs::write(
        &config,
        format!(
            "[economy]\nstarting_wallet = {{ coins = 1000000 }}\n\
             [world]\nmap = {map:?}\nshards = 2\ntiles_per_shard = 10\ncheckpoint_interval_s = 1\n\
             seed_towers_per_shard = 1000\nactions_per_sec = 0\nlease_ms = 1500\naoi_max_side_m = 4000\n\
             checkpoint_dir = {volume:?}\n"
        ),
    )
    .expect("config");
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let names = ["a", "b", "c"];
    let dbs: Vec<Database> = names
        .iter()
        .map(|_| Database {
            dir: tempfile::tempdir().expect("dir"),
            url: pg.url.clone(),
        })
        .collect();
    let mut nodes: Vec<Option<Binary>> = Vec::new();
    for (db, name) in dbs.iter().zip(names) {
        let command = world_node(db, &config, &nats, &prefix, name);
        nodes.push(Some(Binary::run(command, free_port()).await));
    }
    // Two shards over three nodes: one each on two of them.
    eventually("each shard running on its own node", || async {
        match (owner_of(&nodes, 0).await, owner_of(&nodes, 1).await) {
            (Some((a, _)), Some((b, _))) => a != b,
            _ => false,
        }
    })
    .await;
    let (owner, epoch) = owner_of(&nodes, 0).await.expect("shard 0's node");
    let (owner_1, _) = owner_of(&nodes, 1).await.expect("shard 1's node");
    let idle = (0..3)
        .find(|i| *i != owner && *i != owner_1)
        .expect("a node running no shard");
    let entry = nodes[idle].as_ref().expect("entry node");
    let base = entry.base();
    let addr = format!("127.0.0.1:{}", entry.port);

    // Alice, on a node that runs no shard, watches shard 0 and claims in it.
    let (token, _) = support::device_session_at(&base, "device-world-cluster-alice").await;
    let mut alice = Client::with_token(&addr, &token).await;
    let (cx, cy) = map_centre();
    let area = json!({"shard": 0, "min_x": cx - 1500.0, "min_y": cy - 1500.0,
                      "max_x": cx + 1500.0, "max_y": cy + 1500.0});
    let first = alice
        .ok("world_subscribe", area.clone(), "world_state")
        .await;
    assert_eq!(first["snapshot"], true, "{first}");
    assert!(!first["towers"].as_array().expect("towers").is_empty());
    let (building, tower) = claim_in(&base, &token, 0).await;
    // The claim reaches her view from the shard's node.
    let mut seen = false;
    for _ in 0..100 {
        let state = alice.event("world_state").await;
        if state["towers"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["id"].as_u64() == Some(tower)))
        {
            seen = true;
            break;
        }
    }
    assert!(seen, "the claimed tower never reached the subscriber");
    // A protobuf socket on the same node gets the routed states in binary: its snapshot, then
    // updates (encoded in its format by the shard's node).
    let (bob, _) = support::device_session_at(&base, "device-world-cluster-bob").await;
    let url = format!("ws://{addr}/ws?token={bob}&format=protobuf");
    let (mut binary, _) = connect_async(url).await.expect("connect");
    let subscribe = Envelope::new(
        "9",
        Kind::WorldSubscribe(rt::WorldSubscribe {
            shard: 0,
            min_x: cx - 1500.0,
            min_y: cy - 1500.0,
            max_x: cx + 1500.0,
            max_y: cy + 1500.0,
        }),
    );
    binary
        .send(Message::binary(rt::encode_protobuf(&subscribe)))
        .await
        .expect("send");
    let states = protobuf_states(&mut binary, 2).await;
    assert_eq!(states[0].0, "9");
    assert!(states[0].1.snapshot && states[0].1.towers.iter().any(|t| u64::from(t.id) == tower));
    assert!(!states[1].1.snapshot && states[1].0.is_empty());
    drop(binary);

    // Shard 0's node is killed: another takes the shard once the lease expires.
    let killed = std::time::Instant::now();
    nodes[owner].take().expect("owner").kill9();
    eventually("shard 0 running again on another node", || async {
        owner_of(&nodes, 0).await.is_some_and(|(_, e)| e > epoch)
    })
    .await;
    eprintln!("shard 0 resumed {:?} after the kill", killed.elapsed());
    // Alice's subscription goes on: a fresh snapshot from the new node, with her tower.
    let towers = next_snapshot(&mut alice).await;
    assert!(towers.contains(&tower), "the claim was lost: {towers:?}");
    // The claim is there for the shard's rules too: claiming the building again is refused.
    let again = json!({"shard": 0, "building": building});
    let (status, body) = rpc(&base, &token, "world_claim", again).await;
    assert_eq!(status, 409, "{body}");

    // The node that runs a shard other than the entry's is drained: its shard moves with a
    // claim made through the entry node just before.
    let (other, drained_shard) = {
        let mut found = None;
        for shard in 0..2 {
            if let Some((node, _)) = owner_of(&nodes, shard).await {
                if node != idle {
                    found = Some((node, shard));
                }
            }
        }
        found.expect("a shard on the other node")
    };
    let (before_drain, _) = claim_in(&base, &token, drained_shard).await;
    drain(nodes[other].as_mut().expect("other"));
    nodes[other] = None;
    eventually(
        "the drained node's shard running on the entry node",
        || async {
            owner_of(&nodes, drained_shard)
                .await
                .is_some_and(|(n, _)| n == idle)
        },
    )
    .await;
    let again = json!({"shard": drained_shard, "building": before_drain});
    let (status, body) = rpc(&base, &token, "world_claim", again).await;
    assert_eq!(
        status, 409,
        "the claim made before the drain was lost: {body}"
    );

    // A node joins: the entry node, running both shards, hands one over to it (a last
    // checkpoint, then its lease released), and the claim in that shard is still there.
    let joiner = Database {
        dir: tempfile::tempdir().expect("dir"),
        url: pg.url.clone(),
    };
    let command = world_node(&joiner, &config, &nats, &prefix, "e");
    nodes.push(Some(Binary::run(command, free_port()).await));
    let joined = nodes.len() - 1;
    eventually("a shard handed over to the node that joined", || async {
        match (owner_of(&nodes, 0).await, owner_of(&nodes, 1).await) {
            (Some((a, _)), Some((b, _))) => a != b && (a == joined || b == joined),
            _ => false,
        }
    })
    .await;
    let moved: u32 = if owner_of(&nodes, 0).await.is_some_and(|(n, _)| n == joined) {
        0
    } else {
        1
    };
    // Alice's first claim is in shard 0, the one before the drain in the drained node's shard.
    let claimed = match moved {
        m if m == drained_shard => Some(before_drain),
        0 => Some(building),
        _ => None,
    };
    if let Some(claimed) = claimed {
        let again = json!({"shard": moved, "building": claimed});
        let (status, body) = rpc(&base, &token, "world_claim", again).await;
        assert_eq!(status, 409, "a claim was lost in the handover: {body}");
    }

    // From the terms: epochs grow, and no term starts before the previous one ended (its
    // release, or its lease's last expiry).
    let (client, connection) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    for shard in 0..2i32 {
        let rows = client
            .query(
                "SELECT epoch, holder, started_ms, expires_at_ms, ended_ms
                 FROM world_shard_terms WHERE shard = $1 ORDER BY epoch",
                &[&shard],
            )
            .await
            .expect("terms");
        assert!(rows.len() >= 2, "shard {shard} moved at least once");
        for pair in rows.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            let ended: i64 = before
                .get::<_, Option<i64>>(4)
                .unwrap_or_else(|| before.get(3));
            assert!(after.get::<_, i64>(0) > before.get::<_, i64>(0));
            assert!(
                after.get::<_, i64>(2) >= ended,
                "shard {shard}: {} started at {} before {} ended at {ended}",
                after.get::<_, String>(1),
                after.get::<_, i64>(2),
                before.get::<_, String>(1),
            );
        }
    }
    // A node whose checkpoint folder is not the shared volume refuses to start.
    let elsewhere = tempfile::tempdir().expect("another folder");
    let wrong = elsewhere.path().join("world.toml");
    let settings = std::fs::read_to_string(&config).expect("config");
    let other_dir = elsewhere.path().join("world").display().to_string();
    std::fs::write(
        &wrong,
        settings.replace(&format!("{volume:?}"), &format!("{other_dir:?}")),
    )
    .expect("config");
    let stray = Database {
        dir: tempfile::tempdir().expect("dir"),
        url: pg.url.clone(),
    };
    let out = world_node(&stray, &wrong, &nats, &prefix, "d")
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port()))
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("is not the volume this cluster's world lives on"),
        "{stderr}"
    );
    // The drained node's term ended with its release, not by expiry.
    let drained_name = names[other];
    let released: i64 = client
        .query_one(
            "SELECT count(*) FROM world_shard_terms
             WHERE holder = $1 AND shard = $2 AND ended_ms IS NOT NULL",
            &[&drained_name, &(drained_shard as i32)],
        )
        .await
        .expect("released")
        .get(0);
    assert_eq!(released, 1);
}
