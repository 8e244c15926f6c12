//! The matchmaker over real sockets: tickets, removal, limits, pairing the right players (and
//! not the wrong ones), tokens that join the matched players into one match, once.

use crate::support;

use muster::config::Config;
use serde_json::json;
use support::client::{b64, error_code, unb64, Client};
use support::{matched_user_ids, Backend, Database, TestServer};

async fn server(tune: impl FnOnce(&mut Config)) -> (TestServer, Database) {
    let db = Database::new(Backend::Sqlite).await;
    let mut config = db.config();
    config.matchmaker.interval_ms = 50;
    tune(&mut config);
    (TestServer::start(config).await, db)
}

async fn add(ws: &mut Client, query: &str, region: &str) -> String {
    let reply = ws
        .request(json!({"matchmaker_add": {
            "min_count": 2, "max_count": 2, "query": query,
            "string_properties": {"region": region}, "numeric_properties": {"skill": 10}
        }}))
        .await;
    reply["matchmaker_ticket"]["ticket"]
        .as_str()
        .unwrap_or_else(|| panic!("a ticket: {reply}"))
        .to_owned()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairs_the_right_players_and_their_tokens_join_one_match() {
    let (server, _db) = server(|_| {}).await;
    let mut eu1 = Client::connect(&server, "mm-eu1").await;
    let mut us1 = Client::connect(&server, "mm-us1").await;
    let mut eu2 = Client::connect(&server, "mm-eu2").await;
    let mut us2 = Client::connect(&server, "mm-us2").await;
    let t_eu1 = add(&mut eu1, "+properties.region:eu", "eu").await;
    add(&mut us1, "+properties.region:us", "us").await;
    add(&mut eu2, "+properties.region:eu", "eu").await;
    add(&mut us2, "+properties.region:us", "us").await;

    let m_eu1 = eu1.next("matchmaker_matched").await["matchmaker_matched"].clone();
    let m_eu2 = eu2.next("matchmaker_matched").await["matchmaker_matched"].clone();
    let m_us1 = us1.next("matchmaker_matched").await["matchmaker_matched"].clone();
    let m_us2 = us2.next("matchmaker_matched").await["matchmaker_matched"].clone();
    assert_eq!(m_eu1["ticket"], json!(t_eu1));
    assert_eq!(
        matched_user_ids(&m_eu1),
        sorted(vec![eu1.user_id.clone(), eu2.user_id.clone()])
    );
    assert_eq!(matched_user_ids(&m_eu2), matched_user_ids(&m_eu1));
    assert_eq!(
        matched_user_ids(&m_us1),
        sorted(vec![us1.user_id.clone(), us2.user_id.clone()])
    );
    assert_eq!(matched_user_ids(&m_us2), matched_user_ids(&m_us1));
    assert_eq!(m_eu1["self"]["presence"]["user_id"], json!(eu1.user_id));
    assert_eq!(m_eu1["self"]["string_properties"]["region"], "eu");
    assert_eq!(m_eu1["users"][0]["numeric_properties"]["skill"], 10.0);
    assert_ne!(m_eu1["token"], m_eu2["token"], "a token per player");
    assert!(m_eu1.get("match_id").is_none());
    // Each matched ticket's wait is observed (what the console charts).
    assert_eq!(
        support::metric(&server, "muster_matchmaker_wait_seconds_count").await,
        4.0
    );

    // Both eu players join with their tokens: the same relayed match, and data flows.
    let j1 = eu1
        .request(json!({"match_join": {"token": m_eu1["token"]}}))
        .await;
    let j2 = eu2
        .request(json!({"match_join": {"token": m_eu2["token"]}}))
        .await;
    let id = j1["match"]["match_id"]
        .as_str()
        .expect("match id")
        .to_owned();
    assert_eq!(j2["match"]["match_id"], json!(id));
    // As Nakama: the answer lists the others, and its size counts those listed.
    assert_eq!(j2["match"]["size"], 1);
    eu2.send(json!({"match_data_send": {"match_id": id, "op_code": 1, "data": b64(b"gg")}}))
        .await;
    assert_eq!(
        unb64(&eu1.next("match_data").await["match_data"]["data"]),
        b"gg"
    );
    // The us players' match is another one.
    let j3 = us1
        .request(json!({"match_join": {"token": m_us1["token"]}}))
        .await;
    assert_ne!(j3["match"]["match_id"], json!(id));
    // A token works once, and only for its player.
    eu1.request(json!({"match_leave": {"match_id": id}})).await;
    let reused = eu1
        .request(json!({"match_join": {"token": m_eu1["token"]}}))
        .await;
    // (Nakama's "match join rejected", as docs/matches.md says, not "bad input".)
    assert_eq!(error_code(&reused), 5);
    assert!(reused["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("already used"));
    let stolen = us2
        .request(json!({"match_join": {"token": m_eu2["token"]}}))
        .await;
    assert_eq!(error_code(&stolen), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_and_disconnected_tickets_never_match() {
    let (server, _db) = server(|_| {}).await;
    let mut gone = Client::connect(&server, "mm-gone").await;
    let mut removed = Client::connect(&server, "mm-removed").await;
    let ticket = add(&mut removed, "*", "eu").await;
    let answer = removed
        .request(json!({"matchmaker_remove": {"ticket": ticket}}))
        .await;
    assert_eq!(
        answer.as_object().map(|o| o.len()),
        Some(1),
        "an empty answer: {answer}"
    );
    let again = removed
        .request(json!({"matchmaker_remove": {"ticket": ticket}}))
        .await;
    assert_eq!(error_code(&again), 3);
    add(&mut gone, "*", "eu").await;
    gone.close().await;
    // Two new players match each other, not the removed or disconnected tickets.
    let mut x = Client::connect(&server, "mm-x").await;
    let mut y = Client::connect(&server, "mm-y").await;
    add(&mut x, "*", "eu").await;
    add(&mut y, "*", "eu").await;
    let mx = x.next("matchmaker_matched").await;
    let my = y.next("matchmaker_matched").await;
    let pair = sorted(vec![x.user_id.clone(), y.user_id.clone()]);
    assert_eq!(matched_user_ids(&mx["matchmaker_matched"]), pair, "{mx}");
    assert_eq!(matched_user_ids(&my["matchmaker_matched"]), pair);
    removed.sync().await;
    assert!(removed.take_pending("matchmaker_matched").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matchmaker_limits_and_bad_input() {
    let (server, _db) = server(|c| c.matchmaker.max_tickets_per_session = 2).await;
    let mut p = Client::connect(&server, "mm-limits").await;
    for bad in [
        json!({"min_count": 1, "max_count": 2, "query": "*"}),
        json!({"min_count": 3, "max_count": 2, "query": "*"}),
        json!({"min_count": 2, "max_count": 2, "query": "region:eu"}),
        json!({"min_count": 2, "max_count": 2, "query": "+properties.a:b OR +properties.c:d"}),
        json!({"min_count": 2, "max_count": 2, "query": "x".repeat(600)}),
    ] {
        let reply = p.request(json!({"matchmaker_add": bad})).await;
        assert_eq!(error_code(&reply), 3, "{reply}");
    }
    add(&mut p, "+properties.region:nowhere", "eu").await;
    add(&mut p, "+properties.region:nowhere", "eu").await;
    let third = p
        .request(json!({"matchmaker_add": {"min_count": 2, "max_count": 2, "query": "*"}}))
        .await;
    assert_eq!(error_code(&third), 3);
    let bogus = p
        .request(json!({"matchmaker_remove": {"ticket": "not-a-ticket"}}))
        .await;
    assert_eq!(error_code(&bogus), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authoritative_matches_from_the_matchmaker() {
    let (server, _db) = server(|c| c.matchmaker.match_handler = "arena".into()).await;
    let mut a = Client::connect(&server, "mm-arena-a").await;
    let mut b = Client::connect(&server, "mm-arena-b").await;
    add(&mut a, "*", "eu").await;
    add(&mut b, "*", "eu").await;
    let ma = a.next("matchmaker_matched").await;
    let mb = b.next("matchmaker_matched").await;
    let ja = a
        .request(json!({"match_join": {"token": ma["matchmaker_matched"]["token"]}}))
        .await;
    let jb = b
        .request(json!({"match_join": {"token": mb["matchmaker_matched"]["token"]}}))
        .await;
    let id = ja["match"]["match_id"].as_str().expect("id");
    assert!(id.ends_with(".muster"), "{id}");
    assert_eq!(ja["match"]["authoritative"], true);
    assert_eq!(jb["match"]["match_id"], json!(id));
    // The arena game runs: both get a welcome and states.
    assert_eq!(a.next("match_data").await["match_data"]["op_code"], "3");
    let state = loop {
        let m = b.next("match_data").await;
        if m["match_data"]["op_code"] == "2" {
            break m;
        }
    };
    let decoded =
        muster_proto::arena::State::decode(&unb64(&state["match_data"]["data"])).expect("state");
    assert!(!decoded.players.is_empty());
}
