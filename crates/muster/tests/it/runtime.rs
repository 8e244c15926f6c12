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
  initializer.registerRpc("chat_edit", rpcChatEdit);
  initializer.registerRpc("disconnect_me", rpcDisconnectMe);
  initializer.registerRpc("logout", rpcLogout);
  initializer.registerRpc("status_follow", rpcStatusFollow);
  initializer.registerRpc("newer_nk", rpcNewerNk);
  initializer.registerRpc("multi_update", rpcMultiUpdate);
  initializer.registerRpc("send_all", rpcSendAll);
  initializer.registerRpc("party_list", rpcPartyList);
  initializer.registerRpc("event_send", rpcEventSend);
  initializer.registerRpc("event_read", rpcEventRead);
  initializer.registerRpc("sql", rpcSql);
  initializer.registerEvent(onEvent);
}

// multiUpdate: every part at once, and nothing applied when any input is bad.
function rpcMultiUpdate(ctx, logger, nk, payload) {
  var me = ctx.userId, out = {};
  nk.storageWrite([{ collection: "multi", key: "old", userId: me, value: { v: 0 } }]);
  out.result = nk.multiUpdate(
    [{ userId: me, displayName: "Multi Me", metadata: { tier: "gold" } }],
    [{ collection: "multi", key: "new", userId: me, value: { v: 1 }, permissionRead: 2 }],
    [{ collection: "multi", key: "old", userId: me }],
    [{ userId: me, changeset: { coins: 7 }, metadata: { why: "multi" } }],
    true);
  var account = nk.accountGetId(me);
  out.displayName = account.user.displayName;
  out.metadata = account.user.metadata;
  out.coins = account.wallet.coins;
  out.stored = nk.storageRead([
    { collection: "multi", key: "new", userId: me },
    { collection: "multi", key: "old", userId: me },
  ]).map(function (o) { return [o.key, o.value.v]; });
  // A bad wallet update refuses the call before the account update (earlier) is applied.
  out.badWallet = codeOf(function () {
    nk.multiUpdate([{ userId: me, displayName: "Never" }], null, null, [{ userId: me, changeset: { coins: "x" } }]);
  });
  out.badStorage = codeOf(function () {
    nk.multiUpdate([{ userId: me, displayName: "Never" }], [{ collection: "", key: "k", value: {} }], null, null);
  });
  out.badAccount = codeOf(function () { nk.multiUpdate([{ userId: "nope" }], null, null, null); });
  out.badPart = codeOf(function () { nk.multiUpdate("x", null, null, null); });
  out.afterBad = nk.accountGetId(me).user.displayName;
  out.empty = nk.multiUpdate(null, null, null, null);
  return JSON.stringify(out);
}

function rpcSendAll(ctx, logger, nk, payload) {
  var p = JSON.parse(payload);
  nk.notificationSendAll(p.subject, { hello: "all" }, 101, p.persistent);
  return JSON.stringify({
    badSubject: codeOf(function () { nk.notificationSendAll("", {}, 1); }),
    badCode: codeOf(function () { nk.notificationSendAll("s", {}, 0); }),
    badContent: codeOf(function () { nk.notificationSendAll("s", "x", 1); }),
  });
}

function rpcPartyList(ctx, logger, nk, payload) {
  var p = JSON.parse(payload);
  return JSON.stringify({
    all: nk.partyList(10),
    open: nk.partyList(10, true),
    closed: nk.partyList(10, false),
    byLabel: nk.partyList(10, null, "+label.mode:duo"),
    otherLabel: nk.partyList(10, null, "+label.mode:raid"),
    firstPage: nk.partyList(1),
    badLimit: codeOf(function () { nk.partyList(0); }),
    badQuery: codeOf(function () { nk.partyList(10, null, "mode:duo"); }),
    badCursor: codeOf(function () { nk.partyList(10, null, "", "nope"); }),
  });
}

function rpcEventSend(ctx, logger, nk, payload) {
  nk.event(payload, { level: "3" }, 1700000000, true);
  return JSON.stringify({
    badProperties: codeOf(function () { nk.event("x", { n: 1 }); }),
    badName: codeOf(function () { nk.event(null, {}); }),
  });
}

function rpcEventRead(ctx, logger, nk, payload) {
  var found = nk.storageRead([{ collection: "events", key: payload, userId: SYSTEM }]);
  return JSON.stringify(found.length ? found[0].value : null);
}

// sqlExec / sqlQuery: a table of the module's own, written and read with params.
function rpcSql(ctx, logger, nk, payload) {
  var out = {};
  out.create = nk.sqlExec("CREATE TABLE IF NOT EXISTS js_scores (id TEXT PRIMARY KEY, score INTEGER, note TEXT)");
  out.insert = nk.sqlExec("INSERT INTO js_scores (id, score, note) VALUES ($1, $2, $3), ($4, $5, NULL)",
    ["a", 10, "first", "b", 20]);
  out.update = nk.sqlExec("UPDATE js_scores SET score = score + $1 WHERE score >= $2", [5, 10]);
  out.rows = nk.sqlQuery("SELECT id, score, note FROM js_scores WHERE score > $1 ORDER BY id", [0]);
  out.reversed = nk.sqlQuery("SELECT $2 AS two, $1 AS one", ["x", "y"]);
  out.types = nk.sqlQuery("SELECT CAST($1 AS DOUBLE PRECISION) AS f, CAST($2 AS INTEGER) AS i, CAST($3 AS NUMERIC) AS n",
    [1.5, 7, 2.5]);
  out.none = nk.sqlQuery("SELECT id FROM js_scores WHERE id = $1", ["zz"]);
  out.returning = nk.sqlQuery("DELETE FROM js_scores WHERE id = $1 RETURNING id, score", ["b"]);
  out.left = nk.sqlQuery("SELECT count(*) AS n FROM js_scores")[0].n;
  out.cleanup = nk.sqlExec("DROP TABLE js_scores");
  try { nk.sqlQuery("SELEC nonsense"); } catch (e) { out.bad = { code: e.code, message: e.message }; }
  try { nk.sqlExec("COMMIT"); } catch (e) { out.commit = e.code; }
  try { nk.sqlExec("SELECT 1", "not an array"); } catch (e) { out.notArray = e.code; }
  return JSON.stringify(out);
}

// registerEvent's function: what it was given, kept in storage for the test to read.
function onEvent(ctx, logger, nk, evt) {
  nk.storageWrite([{ collection: "events", key: evt.name, userId: SYSTEM, value: {
    properties: evt.properties, timestamp: evt.timestamp, external: evt.external, mode: ctx.executionMode,
  } }]);
}

// The code an nk call throws, or "ok".
function codeOf(f) {
  try { f(); return "ok"; } catch (e) { return e.code; }
}

function rpcStatusFollow(ctx, logger, nk, payload) {
  var p = JSON.parse(payload);
  if (p.unfollow) nk.statusUnfollow(ctx.sessionId, [p.other]);
  else nk.statusFollow(ctx.sessionId, [p.other]);
  return JSON.stringify({
    elsewhere: codeOf(function () { nk.statusFollow(SYSTEM.replace(/0$/, "1"), [p.other]); }),
    badUser: codeOf(function () { nk.statusFollow(ctx.sessionId, ["nobody"]); }),
  });
}

function rpcNewerNk(ctx, logger, nk, payload) {
  var me = ctx.userId, other = JSON.parse(payload).other, out = {};
  var unknown = "4b2f1f1e-7d1c-4c57-9a53-3a1f7f4c0d11";

  // Friends: an invite, its metadata.
  nk.friendsAdd(me, "", [other], []);
  out.friendStatus = nk.usersGetFriendStatus(me, [other, unknown]);
  nk.friendMetadataUpdate(me, other, { note: "met in lobby" });
  out.friendAfter = nk.usersGetFriendStatus(me, [other]);
  out.friendNone = nk.usersGetFriendStatus(other, [unknown]);
  out.friendBadMetadata = codeOf(function () { nk.friendMetadataUpdate(me, other, "x"); });

  // Groups by id.
  var group = nk.groupCreate(me, "newer nk group");
  out.groups = nk.groupsGetId([group.id, unknown, group.id]);
  out.groupsMissing = codeOf(function () { nk.groupsGetId(null); });

  // Notifications by id.
  nk.notificationsSend([{ userId: other, subject: "hello", content: { a: 1 }, code: 5, persistent: true }]);
  var id = nk.notificationsList(other, 10).notifications
    .filter(function (n) { return n.subject === "hello"; })[0].id;
  out.notification = nk.notificationsGetId([id]);
  out.notificationOfMe = nk.notificationsGetId([id], me);
  nk.notificationsUpdate([{ id: id, subject: "hello again", content: { b: 2 } }]);
  out.notificationUpdated = nk.notificationsGetId([id], other);
  nk.notificationsDeleteId([id], me);
  out.notificationKept = nk.notificationsGetId([id]).length;
  nk.notificationsDeleteId([id]);
  out.notificationGone = nk.notificationsGetId([id]).length;
  out.notificationBadUpdate = codeOf(function () { nk.notificationsUpdate([{ subject: "x" }]); });
  out.notificationBadId = codeOf(function () { nk.notificationsGetId(["nope"]); });

  // Leaderboards: a listing by pages, a cursor from a rank.
  nk.leaderboardCreate("newer-a", false);
  nk.leaderboardCreate("newer-b", false);
  var first = nk.leaderboardList(1);
  var second = nk.leaderboardList(1, first.cursor);
  out.boards = [first.leaderboards[0].id, second.leaderboards[0].id, second.cursor];
  out.boardsBadLimit = codeOf(function () { nk.leaderboardList(500); });
  nk.leaderboardRecordWrite("newer-a", me, "", 30);
  nk.leaderboardRecordWrite("newer-a", other, "", 20);
  out.fromRank1 = nk.leaderboardRecordsListCursorFromRank("newer-a", 1);
  var cursor = nk.leaderboardRecordsListCursorFromRank("newer-a", 2);
  var page = nk.leaderboardRecordsList("newer-a", [], 10, cursor);
  out.fromRank2 = page.records.map(function (r) { return [r.ownerId, r.rank]; });
  out.fromRankPastEnd = codeOf(function () { nk.leaderboardRecordsListCursorFromRank("newer-a", 4); });
  out.fromRankZero = codeOf(function () { nk.leaderboardRecordsListCursorFromRank("newer-a", 0); });

  // A tournament: one attempt, one more added; records around an owner.
  nk.tournamentCreate("newer-t", false, "descending", "best", 3600, null, {}, "T", "", 1, 0, 0, 0, 1, false);
  nk.tournamentRecordWrite("newer-t", me, "", 10);
  out.secondAttempt = codeOf(function () { nk.tournamentRecordWrite("newer-t", me, "", 11); });
  nk.tournamentAddAttempt("newer-t", me, 1);
  out.addedAttempt = codeOf(function () { nk.tournamentRecordWrite("newer-t", me, "", 12); });
  out.thirdAttempt = codeOf(function () { nk.tournamentRecordWrite("newer-t", me, "", 13); });
  out.zeroAttempts = codeOf(function () { nk.tournamentAddAttempt("newer-t", me, 0); });
  nk.tournamentRecordWrite("newer-t", other, "", 5);
  var around = nk.tournamentRecordsHaystack("newer-t", other, 10);
  out.haystack = around.records.map(function (r) { return [r.ownerId, r.score, r.rank]; });
  out.haystackOfBoard = codeOf(function () { nk.tournamentRecordsHaystack("newer-a", me); });

  // The wallet ledger.
  nk.walletUpdate(me, { gold: 5 }, { why: "quest" });
  var item = nk.walletLedgerList(me).items[0];
  out.ledger = nk.walletLedgerUpdate(item.id, { why: "quest", checked: true });
  out.ledgerMissing = codeOf(function () { nk.walletLedgerUpdate("999999", {}); });
  out.ledgerBad = codeOf(function () { nk.walletLedgerUpdate("x", {}); });
  return JSON.stringify(out);
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

// Sends, edits, lists and removes a message of the system in the room the payload names.
function rpcChatEdit(ctx, logger, nk, payload) {
  var channel = nk.channelIdBuild(ctx.userId, payload, 1);
  var sent = nk.channelMessageSend(channel, { text: "first" }, undefined, undefined, true);
  nk.channelMessageUpdate(channel, sent.messageId, { text: "edited" });
  var listed = nk.channelMessagesList(channel, 10, true);
  nk.channelMessageRemove(channel, sent.messageId);
  var after = nk.channelMessagesList(channel, 10, true);
  var refused = "";
  try {
    nk.channelMessageUpdate(channel, sent.messageId, { text: "x" }, ctx.userId);
  } catch (e) {
    refused = e.message;
  }
  return JSON.stringify({
    channel: channel,
    listed: listed.messages.map(function (m) { return m.content; }),
    after: (after.messages || []).length,
    refused: refused,
  });
}

function rpcDisconnectMe(ctx, logger, nk, payload) {
  nk.sessionDisconnect(ctx.sessionId);
  return "";
}

function rpcLogout(ctx, logger, nk, payload) {
  nk.sessionLogout(ctx.userId, payload);
  return "";
}
"#;

/// A server running [`MODULE`] with `vms` VMs at start.
async fn server(vms: usize) -> (TestServer, Database, tempfile::TempDir) {
    server_on(Backend::Sqlite, vms).await
}

/// [`server`] on `backend`.
async fn server_on(backend: Backend, vms: usize) -> (TestServer, Database, tempfile::TempDir) {
    let db = Database::new(backend).await;
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
    // As Nakama's tracker: an event names the session, not its status.
    assert!(own["joins"][0].get("status").is_none(), "{own}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_follows_statuses_for_a_session() {
    let (server, _db, _dir) = server(1).await;
    let mut a = Client::connect(&server, "nk-status-a").await;
    let mut b = Client::connect(&server, "nk-status-b").await;
    let body = json!({"other": b.user_id}).to_string();
    let followed = a
        .request(json!({"rpc": {"id": "status_follow", "payload": body}}))
        .await;
    assert_eq!(
        payload(&followed),
        json!({"elsewhere": 5, "badUser": 3}),
        "{followed}"
    );
    b.request(json!({"status_update": {"status": "playing"}}))
        .await;
    let event = a.event("status_presence_event").await;
    assert_eq!(event["joins"][0]["user_id"], json!(b.user_id), "{event}");
    assert_eq!(event["joins"][0]["status"], "playing", "{event}");
    let body = json!({"other": b.user_id, "unfollow": true}).to_string();
    let unfollowed = a
        .request(json!({"rpc": {"id": "status_follow", "payload": body}}))
        .await;
    assert!(unfollowed.get("error").is_none(), "{unfollowed}");
}

on_both_backends!(sql_exec_and_query_run_a_modules_own_statements);

async fn sql_exec_and_query_run_a_modules_own_statements(backend: Backend) {
    let (server, _db, _dir) = server_on(backend, 1).await;
    let mut a = Client::connect(&server, "nk-sql-a").await;
    let out = payload(&rpc(&mut a, "sql").await);
    assert_eq!(out["create"], json!({"rowsAffected": 0}), "{out}");
    assert_eq!(out["insert"], json!({"rowsAffected": 2}), "{out}");
    assert_eq!(out["update"], json!({"rowsAffected": 2}), "{out}");
    assert_eq!(
        out["rows"],
        json!([
            {"id": "a", "score": 15, "note": "first"},
            {"id": "b", "score": 25, "note": null},
        ]),
        "{out}"
    );
    assert_eq!(out["reversed"], json!([{"two": "y", "one": "x"}]), "{out}");
    assert_eq!(out["types"], json!([{"f": 1.5, "i": 7, "n": 2.5}]), "{out}");
    assert_eq!(out["none"], json!([]), "{out}");
    assert_eq!(out["returning"], json!([{"id": "b", "score": 25}]), "{out}");
    assert_eq!(out["left"], 1, "{out}");
    assert_eq!(out["bad"]["code"], 13, "{out}");
    let message = out["bad"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("failed to exec db query: ") && message.contains("syntax error"),
        "{out}"
    );
    assert_eq!(out["commit"], 3, "{out}");
    assert_eq!(out["notArray"], 3, "{out}");
}

on_both_backends!(the_newer_nk_functions_answer_as_nakamas_do);

async fn the_newer_nk_functions_answer_as_nakamas_do(backend: Backend) {
    let (server, _db, _dir) = server_on(backend, 1).await;
    let mut a = Client::connect(&server, "nk-newer-a").await;
    let b = Client::connect(&server, "nk-newer-b").await;
    let body = json!({"other": b.user_id}).to_string();
    let answer = a
        .request(json!({"rpc": {"id": "newer_nk", "payload": body}}))
        .await;
    let out = payload(&answer);
    let (me, other) = (json!(a.user_id), json!(b.user_id));

    // Friends.
    let status = out["friendStatus"].as_array().expect("friends");
    assert_eq!(status.len(), 1, "{out}");
    assert_eq!(status[0]["state"], 1, "an invite sent: {out}");
    assert_eq!(status[0]["user"]["userId"], other);
    assert_eq!(status[0]["metadata"], json!({}));
    assert!(status[0]["updateTime"].is_i64(), "{out}");
    assert_eq!(
        out["friendAfter"][0]["metadata"],
        json!({"note": "met in lobby"})
    );
    assert_eq!(out["friendNone"], json!([]));
    assert_eq!(out["friendBadMetadata"], 3);

    // Groups.
    let groups = out["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), 1, "unknown ids left out, one each: {out}");
    assert_eq!(groups[0]["name"], "newer nk group");
    assert_eq!(groups[0]["creatorId"], me);
    assert_eq!(groups[0]["edgeCount"], 1);
    assert!(groups[0]["createTime"].is_i64(), "{out}");
    assert_eq!(out["groupsMissing"], 3);

    // Notifications.
    let notification = &out["notification"][0];
    assert_eq!(notification["userId"], other, "{out}");
    assert_eq!(notification["subject"], "hello");
    assert_eq!(notification["content"], json!({"a": 1}));
    assert_eq!(notification["code"], 5);
    assert_eq!(notification["sender"], "");
    assert_eq!(notification["persistent"], true);
    assert_eq!(out["notificationOfMe"], json!([]), "scoped to its user");
    assert_eq!(out["notificationUpdated"][0]["subject"], "hello again");
    assert_eq!(out["notificationUpdated"][0]["content"], json!({"b": 2}));
    assert_eq!(out["notificationKept"], 1, "not the named user's: kept");
    assert_eq!(out["notificationGone"], 0);
    assert_eq!(out["notificationBadUpdate"], 3);
    assert_eq!(out["notificationBadId"], 3);

    // Leaderboards.
    assert_eq!(out["boards"], json!(["newer-a", "newer-b", null]), "{out}");
    assert_eq!(out["boardsBadLimit"], 3);
    assert_eq!(out["fromRank1"], "");
    assert_eq!(out["fromRank2"], json!([[other, 2]]), "{out}");
    assert_eq!(out["fromRankPastEnd"], 3);
    assert_eq!(out["fromRankZero"], 3);

    // Tournaments.
    assert_ne!(out["secondAttempt"], "ok", "one attempt only: {out}");
    assert_eq!(out["addedAttempt"], "ok", "{out}");
    assert_ne!(out["thirdAttempt"], "ok", "{out}");
    assert_eq!(out["zeroAttempts"], 3);
    assert_eq!(
        out["haystack"],
        json!([[me, 12, 1], [other, 5, 2]]),
        "{out}"
    );
    assert_eq!(out["haystackOfBoard"], 5);

    // The wallet ledger.
    let ledger = &out["ledger"];
    assert_eq!(ledger["userId"], me, "{out}");
    assert_eq!(ledger["changeset"], json!({"gold": 5}));
    assert_eq!(ledger["metadata"], json!({"why": "quest", "checked": true}));
    assert!(ledger["createTime"].is_i64(), "{out}");
    assert_eq!(out["ledgerMissing"], 5);
    assert_eq!(out["ledgerBad"], 3);
}

on_both_backends!(multi_update_applies_every_part_or_refuses_bad_input_first);

async fn multi_update_applies_every_part_or_refuses_bad_input_first(backend: Backend) {
    let (server, _db, _dir) = server_on(backend, 1).await;
    let mut a = Client::connect(&server, "nk-multi-a").await;
    let out = payload(&rpc(&mut a, "multi_update").await);
    let me = json!(a.user_id);
    let acks = &out["result"]["storageWriteAcks"];
    assert_eq!(acks.as_array().map(Vec::len), Some(1), "{out}");
    assert_eq!(acks[0]["collection"], "multi");
    assert_eq!(acks[0]["key"], "new");
    assert_eq!(acks[0]["userId"], me);
    assert!(
        !acks[0]["version"].as_str().unwrap_or("").is_empty(),
        "{out}"
    );
    let wallets = &out["result"]["walletUpdateAcks"];
    assert_eq!(wallets.as_array().map(Vec::len), Some(1), "{out}");
    assert_eq!(wallets[0]["userId"], me);
    assert_eq!(wallets[0]["updated"]["coins"], 7, "{out}");
    assert_eq!(wallets[0]["previous"]["coins"], 0, "{out}");
    // The effects.
    assert_eq!(out["displayName"], "Multi Me", "{out}");
    assert_eq!(out["metadata"], json!({"tier": "gold"}), "{out}");
    assert_eq!(out["coins"], 7, "{out}");
    assert_eq!(
        out["stored"],
        json!([["new", 1]]),
        "written and deleted: {out}"
    );
    // Bad input: refused with code 3 before any part is applied.
    assert_eq!(out["badWallet"], 3, "{out}");
    assert_eq!(out["badStorage"], 3, "{out}");
    assert_eq!(out["badAccount"], 3, "{out}");
    assert_eq!(out["badPart"], 3, "{out}");
    assert_eq!(out["afterBad"], "Multi Me", "nothing applied: {out}");
    assert_eq!(
        out["empty"],
        json!({"storageWriteAcks": [], "walletUpdateAcks": []})
    );
}

on_both_backends!(notification_send_all_reaches_sockets_and_stores_for_every_account);

async fn notification_send_all_reaches_sockets_and_stores_for_every_account(backend: Backend) {
    let (server, _db, _dir) = server_on(backend, 1).await;
    // An account that is offline: no socket.
    let (offline, _) = server.device_session("device-nk-all-offline").await;
    let mut a = Client::connect(&server, "nk-all-a").await;
    let mut b = Client::connect(&server, "nk-all-b").await;

    // Not persistent: every connected socket, the sender's too.
    let body = json!({"subject": "live", "persistent": false}).to_string();
    let checks = payload(&rpc_with(&mut a, "send_all", &body).await);
    assert_eq!(
        checks,
        json!({"badSubject": 3, "badCode": 3, "badContent": 3})
    );
    for socket in [&mut a, &mut b] {
        let event = socket.event("notifications").await;
        let one = &event["notifications"][0];
        assert_eq!(one["subject"], "live", "{event}");
        assert_eq!(one["code"], 101, "{event}");
        assert_ne!(one["persistent"], true, "{event}");
        assert_eq!(
            serde_json::from_str::<Value>(one["content"].as_str().unwrap_or("")).ok(),
            Some(json!({"hello": "all"})),
            "{event}"
        );
    }
    let (_, listed) = server
        .get_with_token("/v2/notification?limit=100", &offline)
        .await;
    assert!(
        listed["notifications"].as_array().is_none_or(Vec::is_empty),
        "not stored: {listed}"
    );

    // Persistent: stored for every account (the offline one too), delivered to the online.
    let body = json!({"subject": "stored", "persistent": true}).to_string();
    rpc_with(&mut a, "send_all", &body).await;
    let event = b.event("notifications").await;
    assert_eq!(event["notifications"][0]["subject"], "stored", "{event}");
    assert_eq!(event["notifications"][0]["persistent"], true, "{event}");
    support::eventually("stored for the offline account", || async {
        let (status, listed) = server
            .get_with_token("/v2/notification?limit=100", &offline)
            .await;
        assert_eq!(status, 200, "{listed}");
        let subjects: Vec<Value> = listed["notifications"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|n| n["subject"].clone())
            .collect();
        subjects == [json!("stored")]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn party_list_lists_this_nodes_parties() {
    let (server, _db, _dir) = server(1).await;
    let mut a = Client::connect(&server, "nk-party-a").await;
    let mut b = Client::connect(&server, "nk-party-b").await;
    let duo = a
        .ok(
            "party_create",
            json!({"open": true, "max_size": 2, "label": r#"{"mode":"duo"}"#}),
            "party",
        )
        .await;
    let closed = b
        .ok(
            "party_create",
            json!({"open": false, "max_size": 4}),
            "party",
        )
        .await;
    let hidden = b
        .ok(
            "party_create",
            json!({"open": true, "max_size": 4, "hidden": true}),
            "party",
        )
        .await;
    let out = payload(&rpc_with(&mut a, "party_list", "{}").await);
    let ids = |list: &Value| -> Vec<Value> {
        let mut ids: Vec<Value> = list["parties"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|p| p["partyId"].clone())
            .collect();
        ids.sort_by_key(|id| id.to_string());
        ids
    };
    let mut both = vec![duo["party_id"].clone(), closed["party_id"].clone()];
    both.sort_by_key(|id| id.to_string());
    assert_eq!(ids(&out["all"]), both, "hidden left out: {out}");
    assert!(!ids(&out["all"]).contains(&hidden["party_id"]));
    assert_eq!(ids(&out["open"]), vec![duo["party_id"].clone()], "{out}");
    assert_eq!(
        ids(&out["closed"]),
        vec![closed["party_id"].clone()],
        "{out}"
    );
    assert_eq!(ids(&out["byLabel"]), vec![duo["party_id"].clone()], "{out}");
    assert_eq!(ids(&out["otherLabel"]), Vec::<Value>::new(), "{out}");
    let listed = &out["byLabel"]["parties"][0];
    assert_eq!(listed["open"], true);
    assert_eq!(listed["maxSize"], 2);
    assert_eq!(listed["label"], r#"{"mode":"duo"}"#);
    assert_eq!(out["all"].get("cursor"), None, "one page: {out}");
    assert_eq!(
        out["firstPage"]["parties"].as_array().map(Vec::len),
        Some(1)
    );
    assert!(out["firstPage"]["cursor"].is_string(), "{out}");
    assert_eq!(out["badLimit"], 3);
    assert_eq!(out["badQuery"], 3);
    assert_eq!(out["badCursor"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_reaches_the_registered_event_function() {
    let (server, _db, _dir) = server(1).await;
    let mut a = Client::connect(&server, "nk-event-a").await;
    let checks = payload(&rpc_with(&mut a, "event_send", "level_up").await);
    assert_eq!(checks, json!({"badProperties": 3, "badName": 3}));
    // The event function runs later: read what it wrote (over HTTP) until it is there.
    let read = || async {
        let response = reqwest::Client::new()
            .post(server.url("/v2/rpc/event_read"))
            .bearer_auth(&a.token)
            .json(&"level_up")
            .send()
            .await
            .expect("rpc");
        let (_, body) = support::status_and_json(response).await;
        serde_json::from_str::<Value>(body["payload"].as_str().unwrap_or("null"))
            .unwrap_or(Value::Null)
    };
    support::eventually("the event function ran", || async {
        !read().await.is_null()
    })
    .await;
    let seen = read().await;
    assert_eq!(
        seen,
        json!({
            "properties": {"level": "3"},
            "timestamp": 1_700_000_000,
            "external": true,
            "mode": "event",
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_edits_chat_and_ends_sessions() {
    let (server, _db, _dir) = server(1).await;
    let mut a = Client::connect(&server, "chat-edit-a").await;
    let joined = a
        .request(json!({"channel_join": {"target": "edits", "type": 1}}))
        .await;
    assert!(joined.get("channel").is_some(), "{joined}");
    let edited = payload(&rpc_with(&mut a, "chat_edit", "edits").await);
    assert_eq!(
        edited["listed"],
        json!([r#"{"text":"edited"}"#]),
        "{edited}"
    );
    assert_eq!(edited["after"], 0, "{edited}");
    assert!(
        !edited["refused"].as_str().unwrap_or("").is_empty(),
        "another sender's name does not edit the system's message: {edited}"
    );
    // The members saw the message, its edit (code 1) and its removal (code 2).
    for code in [0, 1, 2] {
        let message = a.event("channel_message").await;
        assert_eq!(message["code"], code, "{message}");
    }

    // sessionLogout ends the token it is given; sessionDisconnect closes the socket.
    let token = a.token.clone();
    rpc_with(&mut a, "logout", &token).await;
    let (status, _) = server.get_with_token("/v2/account", &token).await;
    assert_eq!(status, 401, "the token is logged out");
    let mut b = Client::connect(&server, "chat-edit-b").await;
    b.send(json!({"rpc": {"id": "disconnect_me"}})).await;
    b.until_closed().await;
}

async fn rpc_with(client: &mut Client, id: &str, body: &str) -> Value {
    client
        .request(json!({"rpc": {"id": id, "payload": body}}))
        .await
}

/// Two nodes of a cluster on one database: each runs `InitModule` once, at start — the count
/// the module keeps in storage is 2, whatever VMs and matches either loads afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs NATS and PostgreSQL"]
async fn init_module_runs_once_per_node_of_a_cluster() {
    let nats = support::nats_url();
    support::postgres_url();
    let db = Database::new(Backend::Postgres).await;
    let module = tempfile::tempdir().expect("dir");
    std::fs::write(module.path().join("index.js"), MODULE).expect("module");
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let mut nodes = Vec::new();
    let mut dirs = Vec::new();
    for name in ["a", "b"] {
        let shared = Database {
            dir: tempfile::tempdir().expect("dir"),
            url: db.url.clone(),
        };
        let mut command = support::cluster_node_command(&shared, &nats, &prefix, name);
        command
            .env("MUSTER_RUNTIME__PATH", module.path())
            .env("MUSTER_RUNTIME__JS_VMS", "3");
        nodes.push(support::Binary::run(command, support::free_port()).await);
        dirs.push(shared);
    }
    for (i, node) in nodes.iter().enumerate() {
        let addr = format!("127.0.0.1:{}", node.port);
        let mut player = Client::connect_at(&addr, &format!("cluster-init-{i}")).await;
        for _ in 0..2 {
            rpc(&mut player, "boom_match").await;
        }
        assert_eq!(payload(&rpc(&mut player, "runs").await), json!({"runs": 2}));
    }
}
