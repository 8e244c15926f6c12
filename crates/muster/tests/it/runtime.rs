//! A JavaScript module written as Nakama's documentation writes one, behaving as it does on
//! Nakama where a player or the module can tell: `InitModule` runs once per node (not in every
//! VM and every match), an RPC's exception reaches the caller with its message, a match whose
//! handler throws disconnects its players, the matchmaker hook's match is announced by its id,
//! a listing with a query ignores the exact label, and a module's streams deliver to the
//! sessions it put on them.

use crate::support;

use muster::config::Config;
use serde_json::{json, Value};
use support::client::{b64, error_code, Client};
use support::{Backend, Database, TestServer};

const MODULE: &str = r#"
var SYSTEM = "00000000-0000-0000-0000-000000000000";

function InitModule(ctx, logger, nk, initializer) {
  // A side effect a module's author expects once per node: counting the runs in storage.
  var found = nk.storageRead([{ collection: "init", key: "runs", userId: SYSTEM }]);
  var runs = found.length ? found[0].value.runs : 0;
  nk.storageWrite([{ collection: "init", key: "runs", userId: SYSTEM, value: { runs: runs + 1 } }]);
  initializer.registerRpc("runs", rpcRuns);
  initializer.registerRpc("fail", rpcFail);
  initializer.registerRpc("boom_match", rpcBoomMatch);
  initializer.registerMatch("boom", {
    matchInit: boomInit,
    matchJoinAttempt: boomJoinAttempt,
    matchJoin: boomJoin,
    matchLeave: boomLeave,
    matchLoop: boomLoop,
    matchTerminate: boomTerminate,
    matchSignal: boomSignal,
  });
  initializer.registerMatchmakerMatched(matched);
  initializer.registerRpc("stream_join", rpcStreamJoin);
  initializer.registerRpc("stream_send", rpcStreamSend);
}

var STREAM = { mode: 123, label: "lobby" };

function rpcStreamJoin(ctx, logger, nk, payload) {
  var joined = nk.streamUserJoin(ctx.userId, ctx.sessionId, STREAM, false, false, "here");
  var me = nk.streamUserGet(ctx.userId, ctx.sessionId, STREAM);
  return JSON.stringify({ joined: joined, count: nk.streamCount(STREAM), status: me.status });
}

function rpcStreamSend(ctx, logger, nk, payload) {
  nk.streamSend(STREAM, payload, null, true);
  var members = nk.streamUserList(STREAM).map(function (p) { return p.userId; }).sort();
  return JSON.stringify({ members: members });
}

function rpcRuns(ctx, logger, nk, payload) {
  return JSON.stringify(nk.storageRead([{ collection: "init", key: "runs", userId: SYSTEM }])[0].value);
}

function rpcFail(ctx, logger, nk, payload) {
  throw Error("no input allowed");
}

function rpcBoomMatch(ctx, logger, nk, payload) {
  return JSON.stringify({ matchId: nk.matchCreate("boom", {}) });
}

function boomInit(ctx, logger, nk, params) {
  return { state: {}, tickRate: 10, label: JSON.stringify({ mode: "duel" }) };
}
function boomJoinAttempt(ctx, logger, nk, dispatcher, tick, state, presence, metadata) {
  return { state: state, accept: true };
}
function boomJoin(ctx, logger, nk, dispatcher, tick, state, presences) {
  return { state: state };
}
function boomLeave(ctx, logger, nk, dispatcher, tick, state, presences) {
  return { state: state };
}
function boomLoop(ctx, logger, nk, dispatcher, tick, state, messages) {
  for (var i = 0; i < messages.length; i++) {
    if (messages[i].opCode === 13) throw Error("the match breaks");
  }
  return { state: state };
}
function boomTerminate(ctx, logger, nk, dispatcher, tick, state, graceSeconds) {
  return { state: state };
}
function boomSignal(ctx, logger, nk, dispatcher, tick, state, data) {
  return { state: state, data: "" };
}

function matched(ctx, logger, nk, entries) {
  return nk.matchCreate("boom", {});
}
"#;

/// A server running [`MODULE`] with `vms` VMs at start.
async fn server(vms: usize) -> (TestServer, Database, tempfile::TempDir) {
    let db = Database::new(Backend::Sqlite).await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("index.js"), MODULE).expect("module");
    let mut config: Config = db.config();
    config.runtime.path = dir.path().display().to_string();
    config.runtime.js_vms = vms;
    (TestServer::start(config).await, db, dir)
}

async fn rpc(client: &mut Client, id: &str) -> Value {
    client.request(json!({"rpc": {"id": id}})).await
}

fn payload(answer: &Value) -> Value {
    serde_json::from_str(answer["rpc"]["payload"].as_str().expect("payload")).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_module_runs_once_per_node() {
    let (server, _db, _dir) = server(3).await;
    let mut a = Client::connect(&server, "init-once-a").await;
    assert_eq!(payload(&rpc(&mut a, "runs").await), json!({"runs": 1}));
    // Matches load VMs of their own; none runs InitModule again.
    for _ in 0..3 {
        rpc(&mut a, "boom_match").await;
    }
    // Calls at once, over HTTP: the pool grows past its VMs at start, still without it.
    let http = reqwest::Client::new();
    let calls = (0..6).map(|_| {
        http.post(server.url("/v2/rpc/runs"))
            .bearer_auth(&a.token)
            .json(&"")
            .send()
    });
    for response in futures_util::future::join_all(calls).await {
        let (status, body) = support::status_and_json(response.expect("rpc")).await;
        assert_eq!(status, 200, "{body}");
        let runs: Value =
            serde_json::from_str(body["payload"].as_str().expect("payload")).expect("JSON");
        assert_eq!(runs, json!({"runs": 1}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rpcs_exception_reaches_the_caller_with_its_message() {
    let (server, _db, _dir) = server(1).await;
    let mut a = Client::connect(&server, "rpc-error-a").await;
    let response = reqwest::Client::new()
        .post(server.url("/v2/rpc/fail"))
        .bearer_auth(&a.token)
        .json(&"")
        .send()
        .await
        .expect("rpc");
    let (status, body) = support::status_and_json(response).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["code"], 13, "{body}");
    let message = body["message"].as_str().expect("message");
    assert!(
        message.starts_with("Error: no input allowed"),
        "Nakama's words, the message kept: {message}"
    );
    let refused = rpc(&mut a, "fail").await;
    assert_eq!(
        error_code(&refused),
        7,
        "RUNTIME_FUNCTION_EXCEPTION: {refused}"
    );
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap_or("")
        .starts_with("Error: no input allowed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_match_whose_handler_throws_disconnects_its_players() {
    let (server, _db, _dir) = server(1).await;
    let mut a = Client::connect(&server, "boom-a").await;
    let mut b = Client::connect(&server, "boom-b").await;
    let id = payload(&rpc(&mut a, "boom_match").await)["matchId"]
        .as_str()
        .expect("match id")
        .to_owned();
    for player in [&mut a, &mut b] {
        let joined = player
            .request(json!({"match_join": {"match_id": id}}))
            .await;
        assert_eq!(joined["match"]["match_id"], json!(id), "{joined}");
    }
    b.send(json!({"match_data_send": {"match_id": id, "op_code": 13, "data": b64(b"x")}}))
        .await;
    a.until_closed().await;
    b.until_closed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_matched_hooks_match_is_announced_by_its_id() {
    let (server, _db, _dir) = server(1).await;
    let mut a = Client::connect(&server, "hook-a").await;
    let mut b = Client::connect(&server, "hook-b").await;
    for player in [&mut a, &mut b] {
        player
            .request(json!({"matchmaker_add": {"query": "*", "min_count": 2, "max_count": 2}}))
            .await;
    }
    let mut ids = Vec::new();
    for player in [&mut a, &mut b] {
        let matched = player.event("matchmaker_matched").await;
        assert!(matched.get("token").is_none(), "{matched}");
        let id = matched["match_id"].as_str().expect("match_id").to_owned();
        let joined = player
            .request(json!({"match_join": {"match_id": id}}))
            .await;
        assert_eq!(joined["match"]["authoritative"], true, "{joined}");
        ids.push(id);
    }
    assert_eq!(ids[0], ids[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_with_a_query_ignores_the_label() {
    let (server, _db, _dir) = server(1).await;
    let mut a = Client::connect(&server, "listing-a").await;
    let id = payload(&rpc(&mut a, "boom_match").await)["matchId"].clone();
    let list = |query: &'static str| {
        let url = server.url(&format!("/v2/match?authoritative=true&limit=10&{query}"));
        let token = a.token.clone();
        async move {
            let response = reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .expect("list");
            let (status, body) = support::status_and_json(response).await;
            assert_eq!(status, 200, "{body}");
            body["matches"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|m| m["match_id"].clone())
                .collect::<Vec<_>>()
        }
    };
    assert!(list("label=other").await.is_empty());
    assert_eq!(list("label=other&query=%2Blabel.mode:duel").await, vec![id]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modules_stream_delivers_data_and_presence_to_its_sessions() {
    let (server, _db, _dir) = server(1).await;
    let mut a = Client::connect(&server, "stream-a").await;
    let mut b = Client::connect(&server, "stream-b").await;
    let joined = payload(&rpc(&mut a, "stream_join").await);
    assert_eq!(
        joined,
        json!({"joined": true, "count": 1, "status": "here"})
    );
    let own = a.event("stream_presence_event").await;
    assert_eq!(own["stream"], json!({"mode": 123, "label": "lobby"}));
    assert_eq!(own["joins"][0]["user_id"], json!(a.user_id));
    assert_eq!(own["joins"][0]["status"], "here");
    assert_eq!(payload(&rpc(&mut b, "stream_join").await)["count"], 2);
    let b_id = b.user_id.clone();
    for member in [&mut a, &mut b] {
        let event = member.event("stream_presence_event").await;
        assert_eq!(event["joins"][0]["user_id"], json!(b_id));
    }
    // Joining again changes nothing.
    assert_eq!(payload(&rpc(&mut b, "stream_join").await)["joined"], false);

    let sent = b
        .request(json!({"rpc": {"id": "stream_send", "payload": "hello"}}))
        .await;
    let mut members: Vec<String> = vec![a.user_id.clone(), b.user_id.clone()];
    members.sort();
    assert_eq!(payload(&sent)["members"], json!(members));
    for member in [&mut a, &mut b] {
        let data = member.event("stream_data").await;
        assert_eq!(
            data,
            json!({"stream": {"mode": 123, "label": "lobby"}, "data": "hello", "reliable": true})
        );
    }
    // A session that ends leaves its streams; the others are told.
    b.close().await;
    let left = a.event("stream_presence_event").await;
    assert_eq!(left["leaves"][0]["user_id"], json!(b_id));
    assert_eq!(payload(&rpc(&mut a, "stream_join").await)["count"], 1);
    // A client may not send stream envelopes.
    let refused = a.request(json!({"stream_data": {"data": "forged"}})).await;
    assert_eq!(error_code(&refused), 1, "{refused}");
}
