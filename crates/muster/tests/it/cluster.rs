//! The cluster's membership over a real NATS server: nodes (the real `muster` binary, each its
//! own process) see each other, one that shuts down says goodbye, one killed with -9 is taken for
//! dead after the failure timeout, and a node that cannot reach NATS does not start.
//!
//! Needs `TEST_NATS_URL` (the test command starts a private `nats-server`), and some
//! `TEST_POSTGRES_URL`: those tests are ignored unless asked for.

use crate::support;

use std::process::Command;

use support::{eventually, free_port, nats_url, presence_ids, Backend, Binary, Database};

/// A node of the cluster `prefix` (see [`support::cluster_node_command`]).
/// A node of a test cluster; its players start with 1,000 coins (the tests spend some).
fn node(db: &Database, nats: &str, prefix: &str, name: &str) -> Command {
    let mut command = support::cluster_node_command(db, nats, prefix, name);
    command.env("MUSTER_ECONOMY__STARTING_WALLET", "{coins=1000}");
    command
}

async fn metric(node: &Binary, name: &str) -> f64 {
    support::metric_at(&node.base(), name).await
}

/// Nodes named `names` of one cluster (its subject prefix is returned first), each on a fresh
/// SQLite database, once every one counts them all.
async fn cluster_of(nats: &str, names: &[&str]) -> (String, Vec<Database>, Vec<Binary>) {
    let prefix = unique_prefix();
    let mut dbs = Vec::new();
    let mut nodes = Vec::new();
    for name in names {
        let db = Database::new(Backend::Sqlite).await;
        nodes.push(Binary::run(node(&db, nats, &prefix, name), free_port()).await);
        dbs.push(db);
    }
    until_nodes(&nodes.iter().collect::<Vec<_>>(), names.len()).await;
    (prefix, dbs, nodes)
}

/// Waits until every one of `nodes` counts `count` live nodes.
async fn until_nodes(nodes: &[&Binary], count: usize) {
    for n in nodes {
        eventually("the cluster's nodes see each other", || async {
            metric(n, "muster_cluster_nodes").await == count as f64
        })
        .await;
    }
}

fn unique_prefix() -> String {
    format!("t{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test]
#[ignore = "needs NATS"]
async fn nodes_see_each_other_and_learn_of_goodbyes_and_deaths() {
    let nats = nats_url();
    let (prefix, dbs, nodes) = cluster_of(&nats, &["a", "b", "c"]).await;
    let [a, mut b, mut c]: [Binary; 3] = nodes.try_into().ok().expect("three nodes");

    // c stops cleanly: a and b learn it at once from its goodbye, not by timeout.
    let stopped = Command::new("kill")
        .args(["-TERM", &c.child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(stopped.success());
    c.child.wait().expect("c exits");
    for n in [&a, &b] {
        eventually("c's goodbye", || async {
            metric(n, "muster_cluster_nodes").await == 2.0
        })
        .await;
        assert_eq!(metric(n, "muster_cluster_node_failures_total").await, 0.0);
    }

    // b is killed: no goodbye; a takes it for dead after the failure timeout.
    b.kill9();
    eventually("b taken for dead", || async {
        metric(&a, "muster_cluster_nodes").await == 1.0
    })
    .await;
    assert_eq!(metric(&a, "muster_cluster_node_failures_total").await, 1.0);

    // b comes back (a new incarnation under the same name) and is a member again.
    let b2 = Binary::run(node(&dbs[1], &nats, &prefix, "b"), free_port()).await;
    for n in [&a, &b2] {
        eventually("b back", || async {
            metric(n, "muster_cluster_nodes").await == 2.0
        })
        .await;
    }
}

#[tokio::test]
async fn a_node_without_nats_does_not_start_and_a_single_node_has_no_cluster() {
    let db = Database::new(Backend::Sqlite).await;
    let output = node(&db, "nats://127.0.0.1:1", &unique_prefix(), "lonely")
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port()))
        .output()
        .expect("run muster");
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("NATS"), "{said}");

    let bad = node(&db, "http://127.0.0.1:4222", &unique_prefix(), "x")
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port()))
        .output()
        .expect("run muster");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("cluster.nats_url"));

    // Without a NATS URL: a single node, no cluster metrics.
    let single = Binary::start(&db).await;
    let text = reqwest::get(format!("{}/metrics", single.base()))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(!text.contains("muster_cluster_nodes"));
}

/// A private `nats-server` on `port`, killed when dropped.
struct PrivateNats(std::process::Child);

impl PrivateNats {
    fn start(port: u16) -> PrivateNats {
        let server = PrivateNats(
            Command::new("nats-server")
                .args(["-a", "127.0.0.1", "-p", &port.to_string()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("nats-server (the test command installs it)"),
        );
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("nats-server did not start on {port}"); // dropping `server` kills it
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
#[ignore = "needs NATS"]
async fn nodes_find_each_other_again_after_nats_restarts() {
    nats_url();
    let port = free_port();
    let nats = format!("nats://127.0.0.1:{port}");
    let server = PrivateNats::start(port);
    let prefix = unique_prefix();
    let dbs = [
        Database::new(Backend::Sqlite).await,
        Database::new(Backend::Sqlite).await,
    ];
    let a = Binary::run(node(&dbs[0], &nats, &prefix, "a"), free_port()).await;
    let b = Binary::run(node(&dbs[1], &nats, &prefix, "b"), free_port()).await;
    until_nodes(&[&a, &b], 2).await;
    // NATS goes away: neither hears the other; both keep serving.
    drop(server);
    for n in [&a, &b] {
        eventually("cut off", || async {
            metric(n, "muster_cluster_nodes").await == 1.0
        })
        .await;
        assert!(reqwest::get(format!("{}/healthcheck", n.base()))
            .await
            .is_ok_and(|r| r.status().is_success()));
    }
    // It comes back on the same address: the nodes reconnect, resubscribe and meet again.
    let _server = PrivateNats::start(port);
    for n in [&a, &b] {
        eventually("together again", || async {
            metric(n, "muster_cluster_nodes").await == 2.0
        })
        .await;
    }
    // Their match subjects are back too: a player on b joins a match on a and plays.
    let mut alice =
        support::Client::connect_at(&format!("127.0.0.1:{}", a.port), "nats-back-alice").await;
    let mut bob =
        support::Client::connect_at(&format!("127.0.0.1:{}", b.port), "nats-back-bob").await;
    let id = alice
        .ok("match_create", serde_json::json!({}), "match")
        .await["match_id"]
        .as_str()
        .expect("id")
        .to_owned();
    bob.ok("match_join", serde_json::json!({"match_id": id}), "match")
        .await;
    bob.send(serde_json::json!({"match_data_send": {
        "match_id": id, "op_code": 4, "data": support::client::b64(b"back")}}))
        .await;
    assert_eq!(
        support::client::unb64(&match_data(&mut alice, 4).await["data"]),
        b"back"
    );
}

/// Two nodes of one cluster on one PostgreSQL database (the token keys are the store's, so a
/// token from one is good on the other), once they see each other.
async fn two_nodes_on_postgres() -> (Vec<Database>, Binary, Binary) {
    let (dbs, nodes) = nodes_on_postgres(&["a", "b"]).await;
    let [a, b]: [Binary; 2] = nodes.try_into().ok().expect("two nodes");
    (dbs, a, b)
}

/// Nodes named `names` of one cluster on one PostgreSQL database, once they see each other.
async fn nodes_on_postgres(names: &[&str]) -> (Vec<Database>, Vec<Binary>) {
    let nats = nats_url();
    support::postgres_url();
    let db = Database::new(Backend::Postgres).await;
    let prefix = unique_prefix();
    let mut dbs = Vec::new();
    let mut nodes = Vec::new();
    for name in names {
        let shared = Database {
            dir: tempfile::tempdir().expect("dir"),
            url: db.url.clone(),
        };
        nodes.push(Binary::run(node(&shared, &nats, &prefix, name), free_port()).await);
        dbs.push(shared);
    }
    dbs.push(db);
    until_nodes(&nodes.iter().collect::<Vec<_>>(), names.len()).await;
    (dbs, nodes)
}

async fn session(node: &Binary, device: &str) -> (String, String) {
    support::device_session_at(&node.base(), device).await
}

async fn account_status(node: &Binary, token: &str) -> u16 {
    support::get_with_token_at(&node.base(), "/v2/account", token)
        .await
        .0
}

#[tokio::test]
#[ignore = "needs NATS and PostgreSQL"]
async fn a_logout_on_one_node_is_refused_by_the_others_at_once() {
    let (_dbs, a, b) = two_nodes_on_postgres().await;
    let (token, refresh) = session(&a, "cluster-logout-device").await;
    assert_eq!(
        account_status(&b, &token).await,
        200,
        "a token from a is good on b"
    );

    let logout = reqwest::Client::new()
        .post(format!("{}/v2/session/logout", a.base()))
        .bearer_auth(&token)
        .json(&serde_json::json!({ "token": token, "refresh_token": refresh }))
        .send()
        .await
        .expect("logout");
    assert!(logout.status().is_success());
    assert_eq!(account_status(&a, &token).await, 401);
    // b learns it over the bus (its own reload from the store is a minute away).
    eventually("b refuses the revoked token", || async {
        account_status(&b, &token).await == 401
    })
    .await;
    let refreshed = reqwest::Client::new()
        .post(format!("{}/v2/account/session/refresh", b.base()))
        .basic_auth("defaultkey", Some(""))
        .json(&serde_json::json!({ "token": refresh }))
        .send()
        .await
        .expect("refresh");
    assert_eq!(refreshed.status().as_u16(), 401, "the refresh token too");
}

#[tokio::test]
#[ignore = "needs NATS and PostgreSQL"]
async fn a_refresh_token_works_once_across_nodes() {
    let (_dbs, a, b) = two_nodes_on_postgres().await;
    for round in 0..3 {
        let (_, refresh) = session(&a, &format!("cluster-refresh-race-{round}")).await;
        // Twenty refreshes of one token at once, half through each node.
        let attempts = (0..20).map(|i| {
            let base = if i % 2 == 0 { a.base() } else { b.base() };
            let refresh = refresh.clone();
            async move {
                reqwest::Client::new()
                    .post(format!("{base}/v2/account/session/refresh"))
                    .basic_auth("defaultkey", Some(""))
                    .json(&serde_json::json!({ "token": refresh }))
                    .send()
                    .await
                    .expect("refresh")
                    .status()
                    .as_u16()
            }
        });
        let statuses = futures_util::future::join_all(attempts).await;
        let ok = statuses.iter().filter(|s| **s == 200).count();
        assert_eq!(ok, 1, "round {round}: {statuses:?}");
        assert!(
            statuses.iter().all(|s| *s == 200 || *s == 401),
            "{statuses:?}"
        );
    }
}

async fn join_room(client: &mut support::Client, room: &str) -> serde_json::Value {
    client
        .ok(
            "channel_join",
            serde_json::json!({"target": room, "type": 1}),
            "channel",
        )
        .await
}

async fn say(client: &mut support::Client, channel_id: &str, text: &str) {
    let content = serde_json::json!({ "text": text }).to_string();
    client
        .ok(
            "channel_message_send",
            serde_json::json!({"channel_id": channel_id, "content": content}),
            "channel_message_ack",
        )
        .await;
}

fn text_of(message: &serde_json::Value) -> String {
    serde_json::from_str::<serde_json::Value>(message["content"].as_str().unwrap_or("{}"))
        .map(|c| c["text"].as_str().unwrap_or("").to_owned())
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs NATS"]
async fn players_on_different_nodes_chat_and_see_each_other() {
    let nats = nats_url();
    let (prefix, _dbs, nodes) = cluster_of(&nats, &["a", "b"]).await;
    let [a, mut b]: [Binary; 2] = nodes.try_into().ok().expect("two nodes");
    let a_addr = format!("127.0.0.1:{}", a.port);
    let b_addr = format!("127.0.0.1:{}", b.port);
    let mut alice = support::Client::connect_at(&a_addr, "cluster-alice").await;
    let mut bob = support::Client::connect_at(&b_addr, "cluster-bob").await;

    let channel = join_room(&mut alice, "lobby").await;
    let channel_id = channel["id"].as_str().expect("id").to_owned();
    // Bob, on the other node, sees Alice in the room; Alice is told Bob joined.
    // Alice's join reaches b over the bus; wait until b has it.
    let mut wait = support::Wait::new("b to see alice in the room", support::EVENTUALLY);
    let seen = loop {
        let seen = presence_ids(&join_room(&mut bob, "lobby").await["presences"]);
        if !seen.is_empty() {
            break seen;
        }
        wait.tick().await;
    };
    assert_eq!(seen, vec![alice.user_id.clone()]);
    let joined = alice.event("channel_presence_event").await;
    assert_eq!(joined["joins"][0]["user_id"], bob.user_id.as_str());

    // Messages cross in both directions.
    say(&mut bob, &channel_id, "hello from b").await;
    assert_eq!(
        text_of(&alice.event("channel_message").await),
        "hello from b"
    );
    say(&mut alice, &channel_id, "hello from a").await;
    let mut texts = Vec::new();
    for _ in 0..2 {
        texts.push(text_of(&bob.event("channel_message").await));
    }
    assert!(texts.contains(&"hello from a".to_string()), "{texts:?}");

    // A third node that joins later learns who is where from the others' snapshots.
    let db_c = Database::new(Backend::Sqlite).await;
    let c = Binary::run(node(&db_c, &nats, &prefix, "c"), free_port()).await;
    eventually("three nodes", || async {
        metric(&c, "muster_cluster_nodes").await == 3.0
    })
    .await;
    let mut carol =
        support::Client::connect_at(&format!("127.0.0.1:{}", c.port), "cluster-carol").await;
    let mut wait = support::Wait::new("c to see both players in the room", support::EVENTUALLY);
    let everyone = loop {
        let everyone = presence_ids(&join_room(&mut carol, "lobby").await["presences"]);
        if everyone.len() == 2 {
            break everyone;
        }
        wait.tick().await;
    };
    let mut expected = vec![alice.user_id.clone(), bob.user_id.clone()];
    expected.sort();
    assert_eq!(everyone, expected);

    // b is killed: Alice and Carol are told Bob left once b is taken for dead.
    b.kill9();
    let mut left = alice.event("channel_presence_event").await;
    while left.get("leaves").is_none() {
        left = alice.event("channel_presence_event").await;
    }
    assert_eq!(left["leaves"][0]["user_id"], bob.user_id.as_str());
}

async fn account_online(node: &Binary, token: &str) -> bool {
    let (_, account) = support::get_with_token_at(&node.base(), "/v2/account", token).await;
    account["user"]["online"].as_bool().unwrap_or(false)
}

#[tokio::test]
#[ignore = "needs NATS and PostgreSQL"]
async fn a_user_connected_to_one_node_is_online_on_every_node_until_that_node_dies() {
    let (_dbs, a, mut b) = two_nodes_on_postgres().await;
    let (token, _) = session(&a, "cluster-online-device").await;
    assert!(!account_online(&a, &token).await, "no socket yet");
    // A socket on b: a sees the user online.
    let socket = support::Client::with_token(&format!("127.0.0.1:{}", b.port), &token).await;
    eventually("online as seen from a", || async {
        account_online(&a, &token).await
    })
    .await;
    // The socket closes: offline everywhere.
    socket.close().await;
    eventually("offline as seen from a", || async {
        !account_online(&a, &token).await
    })
    .await;
    // Online again, then b dies: a forgets b's sessions after the failure timeout.
    let _again = support::Client::with_token(&format!("127.0.0.1:{}", b.port), &token).await;
    eventually("online again", || async {
        account_online(&a, &token).await
    })
    .await;
    b.kill9();
    eventually("offline once b is dead", || async {
        !account_online(&a, &token).await
    })
    .await;
}

/// A room of the built-in arena game for two, made on `node` by the player of `token`; its id.
async fn arena_room(node: &Binary, token: &str) -> String {
    let room: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/v2/rooms", node.base()))
        .bearer_auth(token)
        .json(&serde_json::json!({"handler": "arena", "capacity": 2}))
        .send()
        .await
        .expect("create room")
        .json()
        .await
        .expect("room");
    room["room_id"].as_str().expect("room id").to_owned()
}

#[tokio::test]
#[ignore = "needs NATS"]
async fn a_room_names_the_node_it_lives_on_not_the_address_the_player_called() {
    let nats = nats_url();
    let db = Database::new(Backend::Sqlite).await;
    let mut command = node(&db, &nats, &unique_prefix(), "roomy");
    command.env("MUSTER_CLUSTER__ADVERTISE", "10.9.8.7:7350");
    let roomy = Binary::run(command, free_port()).await;
    let (token, _) = session(&roomy, "cluster-room-device").await;
    let room = arena_room(&roomy, &token).await;
    let info: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/v2/rooms/{room}/connection", roomy.base()))
        .bearer_auth(&token)
        .send()
        .await
        .expect("connection")
        .json()
        .await
        .expect("info");
    // The player called 127.0.0.1 (a load balancer, in production); the room is on this node.
    assert_eq!(info["host"], "10.9.8.7", "{info}");
    assert_eq!(info["enet"]["host"], "10.9.8.7", "{info}");
}

/// Waits for `client`'s next `match_data` with `op_code`.
async fn match_data(client: &mut support::Client, op_code: i64) -> serde_json::Value {
    loop {
        let data = client.event("match_data").await;
        if data["op_code"].as_str() == Some(op_code.to_string().as_str())
            || data["op_code"].as_i64() == Some(op_code)
        {
            return data;
        }
    }
}

/// Waits for a `match_presence_event` with someone other than `client` in `key` (`joins` or
/// `leaves`): a joiner is told of its own join too, as on Nakama.
async fn match_presence(client: &mut support::Client, key: &str) -> Vec<String> {
    loop {
        let event = client.event("match_presence_event").await;
        let ids = presence_ids(&event[key]);
        if !ids.is_empty() && ids != [client.user_id.clone()] {
            return ids;
        }
    }
}

/// `joiner` joins match `id` by id; it sees `host`, the one member, and `host` is told.
async fn join_across(joiner: &mut support::Client, host: &mut support::Client, id: &str) {
    let joined = joiner
        .ok("match_join", serde_json::json!({"match_id": id}), "match")
        .await;
    assert_eq!(joined["match_id"], id);
    assert_eq!(
        presence_ids(&joined["presences"]),
        vec![host.user_id.clone()]
    );
    assert_eq!(
        match_presence(host, "joins").await,
        vec![joiner.user_id.clone()]
    );
}

#[tokio::test]
#[ignore = "needs NATS"]
async fn a_player_on_another_node_joins_plays_and_leaves_an_authoritative_match() {
    use muster_proto::arena;
    use support::client::{b64, unb64};
    let nats = nats_url();
    let (_prefix, _dbs, nodes) = cluster_of(&nats, &["a", "b"]).await;
    let [a, mut b]: [Binary; 2] = nodes.try_into().ok().expect("two nodes");
    let mut alice =
        support::Client::connect_at(&format!("127.0.0.1:{}", a.port), "xmatch-alice").await;
    let mut bob = support::Client::connect_at(&format!("127.0.0.1:{}", b.port), "xmatch-bob").await;
    let id = arena_room(&a, &alice.token).await;
    assert!(id.ends_with(".a"), "{id}");
    alice
        .ok("match_join", serde_json::json!({"match_id": id}), "match")
        .await;

    // Bob joins from b: the match, on a, answers him and tells Alice.
    join_across(&mut bob, &mut alice, &id).await;
    let welcome = match_data(&mut bob, arena::OP_WELCOME).await;
    let slot = arena::Welcome::decode(&unb64(&welcome["data"]))
        .expect("welcome")
        .slot;

    // Bob's input crosses to a, and the match's state comes back to him and reaches Alice.
    let input = arena::Input {
        seq: 77,
        dx: 1,
        dy: 0,
    }
    .encode();
    bob.send(serde_json::json!({"match_data_send": {
        "match_id": id, "op_code": arena::OP_INPUT, "data": b64(&input)}}))
        .await;
    for player in [&mut bob, &mut alice] {
        loop {
            let state = match_data(player, arena::OP_STATE).await;
            if arena::State::last_seq_of(&unb64(&state["data"]), slot) == Some(77) {
                break;
            }
        }
    }

    // Bob leaves: Alice is told; his data is refused now.
    bob.request(serde_json::json!({"match_leave": {"match_id": id}}))
        .await;
    assert_eq!(
        match_presence(&mut alice, "leaves").await,
        vec![bob.user_id.clone()]
    );
    let (_, message, _) = bob
        .refused(
            "match_data_send",
            serde_json::json!({"match_id": id, "op_code": 1, "data": b64(&input)}),
        )
        .await;
    assert!(message.contains("Not a member"), "{message}");

    // Bob joins again, then b dies: the match drops him once b is taken for dead.
    bob.ok("match_join", serde_json::json!({"match_id": id}), "match")
        .await;
    assert_eq!(
        match_presence(&mut alice, "joins").await,
        vec![bob.user_id.clone()]
    );
    b.kill9();
    assert_eq!(
        match_presence(&mut alice, "leaves").await,
        vec![bob.user_id.clone()]
    );
    eventually("the match counts one player", || async {
        metric(&a, "muster_match_players").await == 1.0
    })
    .await;
}

#[tokio::test]
#[ignore = "needs NATS"]
async fn relayed_matches_span_nodes_until_their_node_dies() {
    use support::client::{b64, unb64};
    let nats = nats_url();
    let (_prefix, _dbs, nodes) = cluster_of(&nats, &["a", "b"]).await;
    let [mut a, b]: [Binary; 2] = nodes.try_into().ok().expect("two nodes");
    let mut alice =
        support::Client::connect_at(&format!("127.0.0.1:{}", a.port), "xrelay-alice").await;
    let mut bob = support::Client::connect_at(&format!("127.0.0.1:{}", b.port), "xrelay-bob").await;
    let created = alice
        .ok("match_create", serde_json::json!({}), "match")
        .await;
    let id = created["match_id"].as_str().expect("id").to_owned();
    assert!(id.ends_with('.'), "a relayed id names no node: {id}");

    // A relayed id names no node, yet b finds the match on a.
    join_across(&mut bob, &mut alice, &id).await;
    bob.send(serde_json::json!({"match_data_send": {
        "match_id": id, "op_code": 5, "data": b64(b"from b")}}))
        .await;
    let data = match_data(&mut alice, 5).await;
    assert_eq!(data["presence"]["user_id"], bob.user_id.as_str());
    assert_eq!(unb64(&data["data"]), b"from b");
    alice
        .send(serde_json::json!({"match_data_send": {
            "match_id": id, "op_code": 6, "data": b64(b"from a")}}))
        .await;
    assert_eq!(unb64(&match_data(&mut bob, 6).await["data"]), b"from a");

    // The match's node dies: Bob is no longer in a match that no node has.
    a.kill9();
    eventually("b has forgotten a's match", || async {
        metric(&b, "muster_cluster_nodes").await == 1.0
    })
    .await;
    let (_, message, _) = bob
        .refused(
            "match_data_send",
            serde_json::json!({"match_id": id, "op_code": 1, "data": b64(b"x")}),
        )
        .await;
    assert!(
        message.contains("Not a member") || message.contains("not found"),
        "{message}"
    );
}

async fn add_ticket(client: &mut support::Client) -> String {
    client
        .ok(
            "matchmaker_add",
            serde_json::json!({"min_count": 2, "max_count": 2, "query": "*"}),
            "matchmaker_ticket",
        )
        .await["ticket"]
        .as_str()
        .expect("ticket")
        .to_owned()
}

async fn lease_epoch(node: &Binary) -> f64 {
    metric(node, "muster_matchmaker_lease_epoch").await
}

#[tokio::test]
#[ignore = "needs NATS and PostgreSQL"]
async fn the_matchmaker_runs_once_for_the_cluster_and_moves_when_its_node_dies() {
    use support::client::{b64, unb64};
    let (_dbs, mut nodes) = nodes_on_postgres(&["a", "b", "c"]).await;
    // One node holds the lease.
    let mut holder = None;
    eventually("one node runs the passes", || async {
        let mut holding = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            if lease_epoch(n).await > 0.0 {
                holding.push(i);
            }
        }
        holding.len() == 1
    })
    .await;
    for (i, n) in nodes.iter().enumerate() {
        if lease_epoch(n).await > 0.0 {
            holder = Some(i);
        }
    }
    let holder = holder.expect("a holder");
    let first_epoch = lease_epoch(&nodes[holder]).await;
    let others: Vec<usize> = (0..3).filter(|i| *i != holder).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let at = |i: usize| format!("127.0.0.1:{}", ports[i]);

    // Two players on the two other nodes are matched together and meet in one match.
    let mut alice = support::Client::connect_at(&at(others[0]), "xmm-alice").await;
    let mut bob = support::Client::connect_at(&at(others[1]), "xmm-bob").await;
    let alice_ticket = add_ticket(&mut alice).await;
    add_ticket(&mut bob).await;
    let matched_a = alice.event("matchmaker_matched").await;
    let matched_b = bob.event("matchmaker_matched").await;
    assert_eq!(matched_a["ticket"], alice_ticket.as_str());
    let mut pair = vec![alice.user_id.clone(), bob.user_id.clone()];
    pair.sort();
    assert_eq!(support::matched_user_ids(&matched_a), pair);
    assert_eq!(support::matched_user_ids(&matched_b), pair);
    let joined_a = alice
        .ok(
            "match_join",
            serde_json::json!({"token": matched_a["token"]}),
            "match",
        )
        .await;
    let joined_b = bob
        .ok(
            "match_join",
            serde_json::json!({"token": matched_b["token"]}),
            "match",
        )
        .await;
    assert_eq!(joined_a["match_id"], joined_b["match_id"], "one match");
    let id = joined_a["match_id"].as_str().expect("id").to_owned();
    bob.send(serde_json::json!({"match_data_send": {
        "match_id": id, "op_code": 3, "data": b64(b"gg")}}))
        .await;
    assert_eq!(unb64(&match_data(&mut alice, 3).await["data"]), b"gg");

    // A player waits on the lease holder, which dies: its ticket goes with it, another node
    // takes the lease over (a higher epoch), and two new players are matched with each other.
    let mut carol = support::Client::connect_at(&at(holder), "xmm-carol").await;
    add_ticket(&mut carol).await;
    nodes[holder].kill9();
    let mut dave = support::Client::connect_at(&at(others[0]), "xmm-dave").await;
    let mut erin = support::Client::connect_at(&at(others[1]), "xmm-erin").await;
    add_ticket(&mut dave).await;
    add_ticket(&mut erin).await;
    let matched_d = dave.event("matchmaker_matched").await;
    let matched_e = erin.event("matchmaker_matched").await;
    let mut pair = vec![dave.user_id.clone(), erin.user_id.clone()];
    pair.sort();
    assert_eq!(
        support::matched_user_ids(&matched_d),
        pair,
        "not with the dead node's player"
    );
    assert_eq!(support::matched_user_ids(&matched_e), pair);
    let epochs = [
        lease_epoch(&nodes[others[0]]).await,
        lease_epoch(&nodes[others[1]]).await,
    ];
    assert!(
        epochs.iter().filter(|e| **e > first_epoch).count() == 1
            && epochs.iter().filter(|e| **e > 0.0).count() == 1,
        "one new holder with a higher epoch: {epochs:?} after {first_epoch}"
    );
}

#[tokio::test]
#[ignore = "needs NATS and PostgreSQL"]
async fn any_node_answers_for_a_room_on_another() {
    let (_dbs, a, b) = two_nodes_on_postgres().await;
    let (token, _) = session(&a, "cluster-rooms-owner").await;
    let room = arena_room(&a, &token).await;
    let http = reqwest::Client::new();
    let get = |node: &Binary, path: String| {
        http.get(format!("{}{path}", node.base()))
            .bearer_auth(&token)
            .send()
    };
    // Its info and a player's connection info, asked of b, are a's.
    let info_b: serde_json::Value = get(&b, format!("/v2/rooms/{room}"))
        .await
        .expect("info")
        .json()
        .await
        .expect("json");
    assert_eq!(info_b["room_id"], room.as_str(), "{info_b}");
    assert_eq!(info_b["handler"], "arena");
    let from_a: serde_json::Value = get(&a, format!("/v2/rooms/{room}/connection"))
        .await
        .expect("connection")
        .json()
        .await
        .expect("json");
    let from_b: serde_json::Value = get(&b, format!("/v2/rooms/{room}/connection"))
        .await
        .expect("connection")
        .json()
        .await
        .expect("json");
    for key in ["room_id", "transport", "host", "port"] {
        assert_eq!(from_b[key], from_a[key], "{key}: {from_b} vs {from_a}");
    }
    // b's ticket is good on a, where the room is.
    let mut player = support::Client::with_token(&format!("127.0.0.1:{}", a.port), &token).await;
    let joined = player
        .ok(
            "match_join",
            serde_json::json!({"token": from_b["ticket"]}),
            "match",
        )
        .await;
    assert_eq!(joined["match_id"], room.as_str());
    // A room no node has, named by b: not found; destroyed through b: gone from a.
    let unknown = format!("{}.a", uuid::Uuid::new_v4());
    let missing = get(&b, format!("/v2/rooms/{unknown}")).await.expect("get");
    assert_eq!(missing.status(), 404);
    let destroyed = http
        .delete(format!("{}/v2/rooms/{room}", b.base()))
        .bearer_auth(&token)
        .send()
        .await
        .expect("delete");
    assert_eq!(destroyed.status(), 204);
    eventually("the room is gone from a", || async {
        get(&a, format!("/v2/rooms/{room}"))
            .await
            .map(|r| r.status() == 404)
            .unwrap_or(false)
    })
    .await;
}

#[tokio::test]
#[ignore = "needs NATS and PostgreSQL"]
async fn a_node_killed_mid_run_loses_nothing_it_acknowledged() {
    let (_dbs, mut a, b) = two_nodes_on_postgres().await;
    let (token, _) = session(&a, "cluster-durable-device").await;
    let http = reqwest::Client::new();
    // Writes acknowledged by a: wallet spends and chat messages (history is stored).
    // (Spends are the server's to make: the HTTP key, naming the player.)
    let user_id = support::claims(&token)["uid"].clone();
    let mut spent = 0;
    for amount in [3, 5, 7, 11] {
        let response = http
            .post(format!(
                "{}/v2/rpc/wallet_spend?http_key=defaulthttpkey",
                a.base()
            ))
            .json(&serde_json::Value::String(
                serde_json::json!({ "amount": amount, "user_id": user_id }).to_string(),
            ))
            .send()
            .await
            .expect("rpc");
        assert_eq!(response.status(), 200);
        spent += amount;
    }
    let mut player = support::Client::with_token(&format!("127.0.0.1:{}", a.port), &token).await;
    let channel_id = join_room(&mut player, "durable").await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    for i in 0..5 {
        say(&mut player, &channel_id, &format!("message {i}")).await;
    }
    // a dies the moment after; the player comes back through b and finds every write.
    a.kill9();
    drop(player);
    let (status, account) = support::get_with_token_at(&b.base(), "/v2/account", &token).await;
    assert_eq!(status, 200, "the session token still holds on b");
    let wallet: serde_json::Value =
        serde_json::from_str(account["wallet"].as_str().expect("wallet")).expect("json");
    let (fresh, _) = session(&b, "cluster-durable-fresh").await;
    let (_, fresh_account) = support::get_with_token_at(&b.base(), "/v2/account", &fresh).await;
    let start: serde_json::Value =
        serde_json::from_str(fresh_account["wallet"].as_str().expect("wallet")).expect("json");
    assert_eq!(
        wallet["coins"].as_i64().expect("coins"),
        start["coins"].as_i64().expect("coins") - spent,
        "every acknowledged spend"
    );
    let mut back = support::Client::with_token(&format!("127.0.0.1:{}", b.port), &token).await;
    join_room(&mut back, "durable").await;
    let (status, history) = support::get_with_token_at(
        &b.base(),
        &format!("/v2/channel/{channel_id}?limit=100&forward=true"),
        &token,
    )
    .await;
    assert_eq!(status, 200, "{history}");
    let texts: Vec<String> = history["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(text_of)
        .collect();
    assert_eq!(
        texts,
        (0..5).map(|i| format!("message {i}")).collect::<Vec<_>>()
    );
}

/// Ranks of a leaderboard listing, by owner, as a node answers them.
async fn ranks_at(node: &Binary, token: &str) -> Vec<(String, String)> {
    let (status, list) =
        support::get_with_token_at(&node.base(), "/v2/leaderboard/shared?limit=100", token).await;
    assert_eq!(status, 200, "{list}");
    list["records"]
        .as_array()
        .map(|records| {
            records
                .iter()
                .map(|r| {
                    (
                        r["owner_id"].as_str().unwrap_or_default().to_owned(),
                        r["rank"].as_str().unwrap_or("0").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs NATS and PostgreSQL"]
async fn two_nodes_writing_one_leaderboard_agree_on_ranks() {
    let nats = nats_url();
    support::postgres_url();
    let db = Database::new(Backend::Postgres).await;
    let prefix = unique_prefix();
    let mut nodes = Vec::new();
    let mut dirs = Vec::new();
    for name in ["a", "b"] {
        let shared = Database {
            dir: tempfile::tempdir().expect("dir"),
            url: db.url.clone(),
        };
        let mut command = node(&shared, &nats, &prefix, name);
        command.env(
            "MUSTER_LEADERBOARDS__BOARDS",
            r#"[{id="shared", sort_order="desc", operator="best"}]"#,
        );
        nodes.push(Binary::run(command, free_port()).await);
        dirs.push(shared);
    }
    until_nodes(&nodes.iter().collect::<Vec<_>>(), 2).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    // Both nodes have read the (empty) period before anyone writes, so each must learn the
    // other's writes over the bus, not from the database.
    let (viewer, _) = session(a, "cluster-lb-viewer").await;
    assert!(ranks_at(a, &viewer).await.is_empty());
    assert!(ranks_at(b, &viewer).await.is_empty());
    // Six players, alternating nodes, each score better than the last (so every write moves
    // the others down a rank), then the first improves to the top through the other node.
    let mut owners = Vec::new();
    for i in 0..6u32 {
        let at = if i % 2 == 0 { a } else { b };
        let (token, _) = session(at, &format!("cluster-lb-{i}")).await;
        let owner = support::claims(&token)["uid"]
            .as_str()
            .expect("uid")
            .to_owned();
        let (status, body) = post_json(
            at,
            &token,
            "/v2/leaderboard/shared",
            serde_json::json!({ "score": 10 * (i + 1) }),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        owners.push((owner, token));
    }
    let (status, top) = post_json(
        b,
        &owners[0].1,
        "/v2/leaderboard/shared",
        serde_json::json!({ "score": 1000 }),
    )
    .await;
    assert_eq!(status, 200, "{top}");
    assert_eq!(top["rank"], "1", "{top}");
    let mut expected: Vec<(String, String)> = vec![(owners[0].0.clone(), "1".into())];
    for (rank, i) in (1..6).rev().enumerate() {
        expected.push((owners[i].0.clone(), (rank + 2).to_string()));
    }
    for at in [a, b] {
        eventually("both nodes rank every record alike", || async {
            ranks_at(at, &viewer).await == expected
        })
        .await;
    }
}

async fn post_json(
    node: &Binary,
    token: &str,
    path: &str,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", node.base()))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("request");
    support::status_and_json(response).await
}

/// A ban made through node a ends the player's sockets on both nodes at once, and b refuses
/// their token without waiting for its periodic reload.
#[tokio::test]
#[ignore = "needs NATS and PostgreSQL"]
async fn a_ban_on_one_node_ends_the_players_sockets_on_every_node() {
    use futures_util::StreamExt as _;
    use tokio_tungstenite::tungstenite::Message;

    let (_dbs, a, b) = two_nodes_on_postgres().await;
    let (token, _) = session(&a, "cluster-banned-device").await;
    let user = support::claims(&token)["uid"]
        .as_str()
        .expect("uid")
        .to_owned();
    let open = |node: &Binary| {
        let url = format!("ws://127.0.0.1:{}/ws?token={token}&format=json", node.port);
        async move {
            tokio_tungstenite::connect_async(url)
                .await
                .expect("socket")
                .0
        }
    };
    let mut sockets = vec![open(&a).await, open(&b).await];
    // Both sockets serve (a ping is answered) before the ban.
    for socket in &mut sockets {
        use futures_util::SinkExt as _;
        socket
            .send(Message::text(r#"{"cid":"1","ping":{}}"#))
            .await
            .expect("ping");
        let pong: serde_json::Value = support::next_json(socket).await;
        assert_eq!(pong["cid"], "1");
    }
    let banned = reqwest::Client::new()
        .post(format!("{}/v2/rpc/ban_users?unwrap", a.base()))
        .basic_auth("defaulthttpkey", Some(""))
        .body(serde_json::json!({ "user_ids": [user] }).to_string())
        .send()
        .await
        .expect("ban");
    assert_eq!(banned.status(), 200);
    for socket in &mut sockets {
        let close = loop {
            match tokio::time::timeout(std::time::Duration::from_secs(10), socket.next())
                .await
                .expect("closed within 10 s")
            {
                Some(Ok(Message::Close(frame))) => break frame,
                Some(Ok(_)) => continue,
                other => panic!("socket ended without a close frame: {other:?}"),
            }
        };
        assert_eq!(
            close.map(|f| f.reason.to_string()).as_deref(),
            Some("banned")
        );
    }
    assert_eq!(account_status(&b, &token).await, 401);
}

/// The console of a two-node cluster: a login on one node's console works on the other's (the
/// sessions are in the shared database), the status page's data names both nodes with their
/// series, the cluster page lists the other node, and ending a player's sessions from one node's
/// console closes their sockets on both.
#[tokio::test]
#[ignore = "needs NATS and PostgreSQL"]
async fn the_console_shows_every_node_and_ends_sessions_everywhere() {
    use futures_util::StreamExt as _;
    use tokio_tungstenite::tungstenite::Message;

    let nats = nats_url();
    support::postgres_url();
    let db = Database::new(Backend::Postgres).await;
    let prefix = unique_prefix();
    let mut dbs = Vec::new();
    let mut nodes = Vec::new();
    let mut consoles = Vec::new();
    for name in ["a", "b"] {
        let shared = Database {
            dir: tempfile::tempdir().expect("dir"),
            url: db.url.clone(),
        };
        let console_port = free_port();
        let mut command = node(&shared, &nats, &prefix, name);
        command
            .env(
                "MUSTER_CONSOLE__LISTEN",
                format!("127.0.0.1:{console_port}"),
            )
            .env("MUSTER_CONSOLE__ADMIN_PASSWORD", "cluster-console-pw");
        nodes.push(Binary::run(command, free_port()).await);
        consoles.push(format!("http://127.0.0.1:{console_port}"));
        dbs.push(shared);
    }
    until_nodes(&nodes.iter().collect::<Vec<_>>(), 2).await;
    let http = reqwest::Client::new();
    let login = http
        .post(format!("{}/api/login", consoles[0]))
        .json(&serde_json::json!({"username": "admin", "password": "cluster-console-pw"}))
        .send()
        .await
        .expect("login");
    assert_eq!(login.status(), 200);
    let cookie = login.headers()["set-cookie"]
        .to_str()
        .expect("cookie")
        .split(';')
        .next()
        .expect("cookie pair")
        .to_owned();
    let csrf = login
        .json::<serde_json::Value>()
        .await
        .expect("login answer")["csrf"]
        .as_str()
        .expect("csrf")
        .to_owned();
    let get = |base: String, path: &'static str| {
        let http = http.clone();
        let cookie = cookie.clone();
        async move {
            http.get(format!("{base}{path}"))
                .header("cookie", cookie)
                .send()
                .await
                .expect("console request")
        }
    };

    // The same login works on the other node's console.
    assert_eq!(get(consoles[1].clone(), "/api/me").await.status(), 200);

    // Each console's status data names both nodes, each with its own series.
    for base in &consoles {
        eventually("both nodes' series on one console", || async {
            let body: serde_json::Value = get(base.clone(), "/api/status")
                .await
                .json()
                .await
                .expect("status");
            let mut named: Vec<(String, usize)> = body["nodes"]
                .as_array()
                .expect("nodes")
                .iter()
                .map(|n| {
                    (
                        n["node"].as_str().unwrap_or("").to_owned(),
                        n["window"]["series"].as_array().map_or(0, Vec::len),
                    )
                })
                .collect();
            named.sort();
            named.len() == 2
                && named[0].0 == "a"
                && named[1].0 == "b"
                && named.iter().all(|n| n.1 > 0)
        })
        .await;
    }
    let cluster: serde_json::Value = get(consoles[0].clone(), "/api/cluster")
        .await
        .json()
        .await
        .expect("cluster");
    assert_eq!(cluster["node"], "a");
    assert_eq!(cluster["peers"][0]["node"], "b");

    // A player with a socket on each node; ending their sessions from a's console closes both.
    let (token, _) = session(&nodes[0], "console-cluster-device").await;
    let user = support::claims(&token)["uid"]
        .as_str()
        .expect("uid")
        .to_owned();
    let mut sockets = Vec::new();
    for n in &nodes {
        let url = format!("ws://127.0.0.1:{}/ws?token={token}&format=json", n.port);
        sockets.push(
            tokio_tungstenite::connect_async(url)
                .await
                .expect("socket")
                .0,
        );
    }
    // A room of node b, its player's socket on b: a's console sees who is in it and kicks them,
    // on b.
    use futures_util::SinkExt as _;
    let b_api = format!("http://127.0.0.1:{}", nodes[1].port);
    let room: serde_json::Value = http
        .post(format!("{b_api}/v2/rooms"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"handler": "arena", "capacity": 2}))
        .send()
        .await
        .expect("room")
        .json()
        .await
        .expect("room json");
    let room = room["room_id"].as_str().expect("room id").to_owned();
    assert!(room.ends_with(".b"), "{room}");
    let info: serde_json::Value = http
        .get(format!("{b_api}/v2/rooms/{room}/connection"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("connection")
        .json()
        .await
        .expect("connection json");
    let join = serde_json::json!({"cid": "join", "match_join": {"token": info["ticket"]}});
    sockets[1]
        .send(Message::text(join.to_string()))
        .await
        .expect("join sent");
    loop {
        let Some(Ok(Message::Text(text))) = sockets[1].next().await else {
            panic!("the socket closed before the join's answer");
        };
        let answer: serde_json::Value = serde_json::from_str(&text).expect("json");
        if answer["cid"] == "join" {
            assert_eq!(answer["match"]["match_id"], room.as_str(), "{answer}");
            break;
        }
    }
    let inspect = || {
        let (http, cookie, url) = (
            http.clone(),
            cookie.clone(),
            format!("{}/api/matches/{room}", consoles[0]),
        );
        async move {
            let seen: serde_json::Value = http
                .get(url)
                .header("cookie", cookie)
                .send()
                .await
                .expect("inspect")
                .json()
                .await
                .expect("inspection");
            seen
        }
    };
    let seen = inspect().await;
    assert_eq!(seen["presences"][0]["user_id"], user.as_str(), "{seen}");
    assert!(
        seen["state"].is_string(),
        "the arena's state, from b: {seen}"
    );
    let kicked = http
        .post(format!("{}/api/matches/{room}/kick", consoles[0]))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .json(&serde_json::json!({"session_id": seen["presences"][0]["session_id"]}))
        .send()
        .await
        .expect("kick");
    assert_eq!(kicked.status(), 200);
    let seen = inspect().await;
    assert_eq!(
        seen["presences"].as_array().map(Vec::len),
        Some(0),
        "{seen}"
    );

    let ended = http
        .post(format!("{}/api/accounts/{user}/sessions/end", consoles[0]))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("end sessions");
    assert_eq!(ended.status(), 200);
    for socket in &mut sockets {
        loop {
            match tokio::time::timeout(std::time::Duration::from_secs(10), socket.next())
                .await
                .expect("closed within 10 s")
            {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => continue,
            }
        }
    }
    // Not a ban: the player connects again.
    assert_eq!(account_status(&nodes[1], &token).await, 200);
    dbs.push(db);
}
