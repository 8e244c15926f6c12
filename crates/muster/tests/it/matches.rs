//! Relayed matches over real sockets: create, join, data to every other member (or only the
//! listed ones), presence events on join, leave and disconnect, and every error path — each a
//! clear error, the match unharmed.

use crate::support;

use muster::config::Config;
use serde_json::json;
use support::client::{b64, error_code, unb64, Client};
use support::{presence_ids, Backend, Database, TestServer};

async fn server(tune: impl FnOnce(&mut Config)) -> (TestServer, Database) {
    let db = Database::new(Backend::Sqlite).await;
    let mut config = db.config();
    tune(&mut config);
    (TestServer::start(config).await, db)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relayed_match_data_reaches_every_other_member() {
    let (server, _db) = server(|_| {}).await;
    let mut a = Client::connect(&server, "relay-a").await;
    let mut b = Client::connect(&server, "relay-b").await;
    let mut c = Client::connect(&server, "relay-c").await;

    let created = a.request(json!({"match_create": {}})).await;
    let m = &created["match"];
    let id = m["match_id"].as_str().expect("match id").to_owned();
    assert!(id.ends_with('.'), "relayed ids end with a dot: {id}");
    // As Nakama: the creator is counted in a create's size, and told of its own join.
    assert_eq!(m["size"], 1);
    assert_eq!(m["self"]["user_id"], json!(a.user_id));
    assert!(m.get("authoritative").is_none(), "relayed: {m}");
    let own = a.next("match_presence_event").await;
    assert_eq!(
        presence_ids(&own["match_presence_event"]["joins"]),
        vec![a.user_id.clone()]
    );

    // A join's answer lists the others, and its size counts them (Nakama: 1 here, not 2);
    // every member, the joiner too, is told of the join.
    let joined = b.request(json!({"match_join": {"match_id": id}})).await;
    assert_eq!(joined["match"]["size"], 1, "{joined}");
    assert_eq!(
        presence_ids(&joined["match"]["presences"]),
        vec![a.user_id.clone()]
    );
    let b_id = b.user_id.clone();
    for member in [&mut a, &mut b] {
        let event = member.next("match_presence_event").await;
        assert_eq!(event["match_presence_event"]["match_id"], json!(id));
        assert_eq!(
            presence_ids(&event["match_presence_event"]["joins"]),
            vec![b_id.clone()]
        );
    }
    let third = c.request(json!({"match_join": {"match_id": id}})).await;
    assert_eq!(third["match"]["size"], 2, "{third}");
    let c_id = c.user_id.clone();
    for member in [&mut a, &mut b, &mut c] {
        let event = member.next("match_presence_event").await;
        assert_eq!(
            presence_ids(&event["match_presence_event"]["joins"]),
            vec![c_id.clone()]
        );
    }
    // Joining again changes nothing, and lists everyone, the joiner included.
    let again = c.request(json!({"match_join": {"match_id": id}})).await;
    assert_eq!(again["match"]["size"], 3, "{again}");
    let mut everyone = presence_ids(&again["match"]["presences"]);
    everyone.sort();
    let mut expected = vec![a.user_id.clone(), b.user_id.clone(), c.user_id.clone()];
    expected.sort();
    assert_eq!(everyone, expected);

    // To everyone else.
    a.send(json!({"match_data_send": {"match_id": id, "op_code": "7", "data": b64(b"hello")}}))
        .await;
    for other in [&mut b, &mut c] {
        let data = other.next("match_data").await;
        let d = &data["match_data"];
        assert_eq!(d["op_code"], "7");
        assert_eq!(unb64(&d["data"]), b"hello");
        assert_eq!(d["presence"]["user_id"], json!(a.user_id));
        assert_eq!(d["match_id"], json!(id));
    }
    // Only to c: b must not get it. b then sends to all; a gets b's message and nothing of its own.
    let c_presence = joined_presence(&mut c, &id).await;
    a.send(json!({"match_data_send": {"match_id": id, "op_code": 8, "data": b64(b"psst"), "presences": [c_presence]}}))
        .await;
    let whisper = c.next("match_data").await;
    assert_eq!(unb64(&whisper["match_data"]["data"]), b"psst");
    b.send(json!({"match_data_send": {"match_id": id, "op_code": 9, "data": b64(b"from b")}}))
        .await;
    let at_a = a.next("match_data").await;
    assert_eq!(
        unb64(&at_a["match_data"]["data"]),
        b"from b",
        "a never gets its own data"
    );
    let at_c = c.next("match_data").await;
    assert_eq!(unb64(&at_c["match_data"]["data"]), b"from b");
    b.sync().await;
    assert!(
        b.take_pending("match_data")
            .iter()
            .all(|m| unb64(&m["match_data"]["data"]) != b"psst"),
        "b was not addressed"
    );

    // Leave: an empty answer with the cid; the others see it.
    let left = b.request(json!({"match_leave": {"match_id": id}})).await;
    assert_eq!(
        left.as_object().map(|o| o.len()),
        Some(1),
        "only the cid: {left}"
    );
    for other in [&mut a, &mut c] {
        let event = other.next("match_presence_event").await;
        assert_eq!(
            presence_ids(&event["match_presence_event"]["leaves"]),
            vec![b.user_id.clone()]
        );
    }
    // Disconnect: the same, without asking.
    c.close().await;
    let event = a.next("match_presence_event").await;
    assert!(presence_ids(&event["match_presence_event"]["leaves"])
        .contains(&c_presence["user_id"].as_str().unwrap_or("").to_owned()));
    // b is no longer a member: its data is refused, a is unharmed.
    let refused = b
        .request(json!({"match_data_send": {"match_id": id, "op_code": 1, "data": b64(b"x")}}))
        .await;
    assert_eq!(error_code(&refused), 4, "{refused}");
    a.sync().await;
    assert!(a.take_pending("match_data").is_empty());

    // The last member leaves: the match ends, and joining it is "ended" (code 4).
    a.request(json!({"match_leave": {"match_id": id}})).await;
    let late = b.request(json!({"match_join": {"match_id": id}})).await;
    assert_eq!(error_code(&late), 4);
    assert!(
        late["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("ended"),
        "{late}"
    );
}

/// c's own presence (from a `match` answer of a repeated join, which changes nothing).
async fn joined_presence(ws: &mut Client, id: &str) -> serde_json::Value {
    let again = ws.request(json!({"match_join": {"match_id": id}})).await;
    again["match"]["self"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_matches_are_shared() {
    let (server, _db) = server(|_| {}).await;
    let mut a = Client::connect(&server, "named-a").await;
    let mut b = Client::connect(&server, "named-b").await;
    let first = a
        .request(json!({"match_create": {"name": "lobby-1"}}))
        .await;
    let second = b
        .request(json!({"match_create": {"name": "lobby-1"}}))
        .await;
    assert_eq!(first["match"]["match_id"], second["match"]["match_id"]);
    assert_eq!(second["match"]["size"], 2);
    let other = b
        .request(json!({"match_create": {"name": "lobby-2"}}))
        .await;
    assert_ne!(first["match"]["match_id"], other["match"]["match_id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn match_errors_are_clear_and_harmless() {
    let (server, _db) = server(|c| {
        c.matches.max_relayed_size = 2;
        c.matches.max_data_bytes = 64;
        c.matches.max_inputs_per_sec = 5;
        c.matches.input_burst = 5;
        c.matches.max_matches_per_session = 2;
    })
    .await;
    let mut a = Client::connect(&server, "err-a").await;
    let mut b = Client::connect(&server, "err-b").await;
    let mut c = Client::connect(&server, "err-c").await;
    let id = a.request(json!({"match_create": {}})).await["match"]["match_id"]
        .as_str()
        .expect("id")
        .to_owned();
    b.request(json!({"match_join": {"match_id": id}})).await;

    // Unknown, malformed, foreign-node ids and empty joins.
    let unknown = c
        .request(json!({"match_join": {"match_id": format!("{}.", uuid::Uuid::new_v4())}}))
        .await;
    assert_eq!(error_code(&unknown), 4);
    let foreign = c
        .request(json!({"match_join": {"match_id": format!("{}.elsewhere", uuid::Uuid::new_v4())}}))
        .await;
    assert_eq!(error_code(&foreign), 4);
    for bad in [json!({"match_id": "nope"}), json!({})] {
        let reply = c.request(json!({"match_join": bad})).await;
        assert_eq!(error_code(&reply), 3, "{reply}");
    }
    let garbage = c
        .request(json!({"match_join": {"token": "not-a-token"}}))
        .await;
    assert_eq!(error_code(&garbage), 3);
    // Full.
    let full = c.request(json!({"match_join": {"match_id": id}})).await;
    assert_eq!(error_code(&full), 5, "{full}");
    // Data from a non-member, oversized data, too fast.
    let outsider = c
        .request(json!({"match_data_send": {"match_id": id, "op_code": 1, "data": b64(b"x")}}))
        .await;
    assert_eq!(error_code(&outsider), 4);
    let big = a
        .request(
            json!({"match_data_send": {"match_id": id, "op_code": 1, "data": b64(&[0u8; 65])}}),
        )
        .await;
    assert_eq!(error_code(&big), 3);
    assert!(
        big["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("64"),
        "{big}"
    );
    // 5 per second with a burst of 5: of 20 sent at once, some are refused with code 3.
    for i in 0..20u8 {
        a.send(json!({"match_data_send": {"match_id": id, "op_code": 2, "data": b64(&[i])}}))
            .await;
    }
    let limited = a.next("error").await;
    assert_eq!(error_code(&limited), 3);
    assert!(limited["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("slow down"));
    // The match is unharmed: b got the allowed ones, and the members are still both there.
    let first = b.next("match_data").await;
    assert_eq!(unb64(&first["match_data"]["data"]), vec![0]);
    let leave_unknown = c
        .request(json!({"match_leave": {"match_id": format!("{}.", uuid::Uuid::new_v4())}}))
        .await;
    assert_eq!(error_code(&leave_unknown), 4);
    // Too many matches for one connection.
    c.request(json!({"match_create": {}})).await;
    c.request(json!({"match_create": {}})).await;
    let third = c.request(json!({"match_create": {}})).await;
    assert_eq!(error_code(&third), 3, "{third}");
    // Client-only kinds are refused.
    let bogus = c.request(json!({"match_data": {"match_id": id}})).await;
    assert_eq!(error_code(&bogus), 1);
    let rejoin = b.request(json!({"match_join": {"match_id": id}})).await;
    assert_eq!(rejoin["match"]["size"], 2, "still two members: {rejoin}");
}
