//! Rooms and authoritative matches over real sockets: the rooms API, connection info and
//! tickets, the native TCP transport, and players on TCP and on WebSocket in the same match of
//! the built-in arena game, whose every input is applied exactly once.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use muster::config::Config;
use muster_proto::arena;
use muster_proto::realtime::{error_code as code, Envelope, MatchDataSend, Message, Ping};
use serde_json::{json, Value};
use support::client::{b64, error_code, join_with_token, unb64, Client, Tcp};
use support::{Backend, Database, TestServer};

async fn server(tune: impl FnOnce(&mut Config)) -> (TestServer, Database) {
    let db = Database::new(Backend::Sqlite).await;
    let mut config = db.config();
    tune(&mut config);
    (TestServer::start(config).await, db)
}

async fn call(
    server: &TestServer,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = server
        .http
        .request(method.parse().expect("method"), server.url(path));
    if let Some(auth) = auth {
        request = request.header("authorization", auth);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    support::status_and_json(request.send().await.expect("request")).await
}

fn bearer(ws: &Client) -> String {
    format!("Bearer {}", ws.token)
}

async fn create_room(server: &TestServer, auth: &str, capacity: u32) -> String {
    let (status, room) = call(
        server,
        "POST",
        "/v2/rooms",
        Some(auth),
        Some(json!({"handler": "arena", "capacity": capacity, "params": {"tick_rate_hz": "20"}})),
    )
    .await;
    assert_eq!(status, 201, "{room}");
    assert_eq!(room["handler"], "arena");
    assert_eq!(room["tick_rate_hz"], 20);
    room["room_id"].as_str().expect("room id").to_owned()
}

async fn connection(server: &TestServer, auth: &str, room: &str) -> Value {
    let (status, info) = call(
        server,
        "GET",
        &format!("/v2/rooms/{room}/connection"),
        Some(auth),
        None,
    )
    .await;
    assert_eq!(status, 200, "{info}");
    info
}

fn tcp_addr(info: &Value) -> SocketAddr {
    assert_eq!(info["transport"], "tcp");
    format!("{}:{}", info["host"].as_str().expect("host"), info["port"])
        .parse()
        .expect("address")
}

fn input_envelope(room: &str, seq: u32, dx: i8, dy: i8) -> Envelope {
    Envelope::new(
        "",
        Message::MatchDataSend(MatchDataSend {
            match_id: room.to_owned(),
            op_code: arena::OP_INPUT,
            data: arena::Input { seq, dx, dy }.encode(),
            ..Default::default()
        }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_and_websocket_players_share_one_authoritative_match() {
    let (server, _db) = server(|_| {}).await;
    let mut a_ws = Client::connect(&server, "room-a").await;
    let mut b = Client::connect(&server, "room-b").await;
    let room = create_room(&server, &bearer(&a_ws), 2).await;
    assert!(
        room.ends_with(".muster"),
        "authoritative ids name the node: {room}"
    );

    // a plays over TCP with its ticket.
    let info = connection(&server, &bearer(&a_ws), &room).await;
    assert_eq!(info["room_id"], json!(room));
    let mut a = Tcp::connect(tcp_addr(&info)).await;
    a.send(&join_with_token(
        "1",
        info["ticket"].as_str().expect("ticket"),
    ))
    .await;
    let joined = a.next_kind("match").await;
    assert_eq!(joined.cid, "1");
    let Some(Message::Match(m)) = joined.message else {
        unreachable!()
    };
    // As Nakama: the first to join sees nobody else (size 0), and is told of its own join.
    assert_eq!(
        (m.match_id.as_str(), m.authoritative, m.size),
        (room.as_str(), true, 0)
    );
    assert_eq!(
        m.self_presence.as_ref().map(|p| p.user_id.as_str()),
        Some(a_ws.user_id.as_str())
    );
    let welcome_a = a.next_kind("match_data").await;
    let Some(Message::MatchData(w)) = welcome_a.message else {
        unreachable!()
    };
    assert_eq!(w.op_code, arena::OP_WELCOME);
    let slot_a = arena::Welcome::decode(&w.data).expect("welcome").slot;

    // b plays over the WebSocket, with its own ticket.
    let info_b = connection(&server, &bearer(&b), &room).await;
    let joined_b = b
        .request(json!({"match_join": {"token": info_b["ticket"]}}))
        .await;
    assert_eq!(joined_b["match"]["match_id"], json!(room));
    assert_eq!(joined_b["match"]["authoritative"], true);
    assert_eq!(
        joined_b["match"]["presences"][0]["user_id"],
        json!(a_ws.user_id)
    );
    let own = a.next_kind("match_presence_event").await;
    let Some(Message::MatchPresenceEvent(e)) = own.message else {
        unreachable!()
    };
    assert_eq!(e.joins[0].user_id, a_ws.user_id);
    let event = a.next_kind("match_presence_event").await;
    let Some(Message::MatchPresenceEvent(e)) = event.message else {
        unreachable!()
    };
    assert_eq!(e.joins[0].user_id, b.user_id);
    let welcome_b = b.next("match_data").await;
    assert_eq!(welcome_b["match_data"]["op_code"], "3");
    let slot_b = arena::Welcome::decode(&unb64(&welcome_b["match_data"]["data"]))
        .expect("welcome")
        .slot;
    assert_ne!(slot_a, slot_b);

    // 30 inputs each: a moves right over TCP, b moves up over the WebSocket.
    for seq in 1..=30u32 {
        a.send(&input_envelope(&room, seq, 1, 0)).await;
        let data = arena::Input { seq, dx: 0, dy: 1 }.encode();
        b.send(json!({"match_data_send": {"match_id": room, "op_code": "1", "data": b64(&data)}}))
            .await;
    }
    // Both see states until every input is applied; each input moved its player exactly once.
    let want = |s: &arena::State| s.players.iter().all(|p| p.last_seq == 30);
    let final_state = loop {
        let env = a.next_kind("match_data").await;
        let Some(Message::MatchData(d)) = env.message else {
            unreachable!()
        };
        assert_eq!(d.op_code, arena::OP_STATE);
        assert!(d.presence.is_none(), "state comes from the match itself");
        let state = arena::State::decode(&d.data).expect("state");
        if want(&state) {
            break state;
        }
    };
    let pa = final_state
        .players
        .iter()
        .find(|p| p.slot == slot_a)
        .expect("a");
    let pb = final_state
        .players
        .iter()
        .find(|p| p.slot == slot_b)
        .expect("b");
    assert_eq!((pa.x, pa.y), (30.0 * 0.5, 0.0));
    assert_eq!((pb.x, pb.y), (0.0, 30.0 * 0.5));
    // The WebSocket player sees the same match state.
    loop {
        let m = b.next("match_data").await;
        let state = arena::State::decode(&unb64(&m["match_data"]["data"])).expect("state");
        if want(&state) {
            assert_eq!(state.players.len(), 2);
            break;
        }
    }

    // Other envelopes work on TCP too.
    a.send(&Envelope::new("p", Message::Ping(Ping {}))).await;
    assert_eq!(a.next_kind("pong").await.cid, "p");

    // Metrics saw the match.
    let metrics = server
        .http
        .get(server.url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    for line in [
        "muster_rooms 1",
        "muster_match_players 2",
        "muster_matches{kind=\"authoritative\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in metrics");
    }
    assert!(metrics.contains("muster_match_tick_duration_seconds_count"));
    assert!(metrics.contains("muster_match_late_ticks_total"));

    // Destroying the room ends the match: the TCP connection is closed.
    let (status, body) = call(
        &server,
        "DELETE",
        &format!("/v2/rooms/{room}"),
        Some(&bearer(&b)),
        None,
    )
    .await;
    assert_eq!(status, 403, "only the creator: {body}");
    let (status, _) = call(
        &server,
        "DELETE",
        &format!("/v2/rooms/{room}"),
        Some(&bearer(&a_ws)),
        None,
    )
    .await;
    assert_eq!(status, 204);
    a.until_closed().await;
    let (status, _) = call(
        &server,
        "GET",
        &format!("/v2/rooms/{room}"),
        Some(&bearer(&b)),
        None,
    )
    .await;
    assert_eq!(status, 404);
    a_ws.sync().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rooms_api_checks_callers_and_input() {
    let (server, _db) = server(|c| c.rooms.admin_key = "game-server-key".into()).await;
    let mut p = Client::connect(&server, "rooms-api").await;
    let auth = bearer(&p);
    let admin = format!("Basic {}", b64(b"game-server-key:"));
    for (body, why) in [
        (json!({"handler": "nope", "capacity": 2}), "unknown handler"),
        (json!({"handler": "arena", "capacity": 0}), "capacity 0"),
        (
            json!({"handler": "arena", "capacity": 1000}),
            "capacity too big",
        ),
        (json!({"handler": "arena"}), "no capacity"),
        (
            json!({"handler": "arena", "capacity": 2, "extra": 1}),
            "unknown field",
        ),
    ] {
        let (status, reply) = call(&server, "POST", "/v2/rooms", Some(&auth), Some(body)).await;
        assert_eq!(status, 400, "{why}: {reply}");
        assert_eq!(reply["code"], 3, "{why}");
    }
    for bad in [None, Some("Bearer junk"), Some("Basic d3Jvbmc6")] {
        let (status, _) = call(
            &server,
            "POST",
            "/v2/rooms",
            bad,
            Some(json!({"handler": "arena", "capacity": 2})),
        )
        .await;
        assert_eq!(status, 401, "{bad:?}");
    }
    let mine = create_room(&server, &auth, 2).await;
    let servers = create_room(&server, &admin, 4).await;
    let (status, list) = call(&server, "GET", "/v2/rooms?handler=arena", Some(&auth), None).await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = list["rooms"]
        .as_array()
        .expect("rooms")
        .iter()
        .filter_map(|r| r["room_id"].as_str())
        .collect();
    assert!(
        ids.contains(&mine.as_str()) && ids.contains(&servers.as_str()),
        "{list}"
    );
    let (_, one) = call(
        &server,
        "GET",
        &format!("/v2/rooms/{mine}"),
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(
        (one["capacity"].as_u64(), one["players"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(one["owner"], json!(p.user_id));
    let (status, _) = call(
        &server,
        "GET",
        &format!("/v2/rooms/{}.muster", uuid::Uuid::new_v4()),
        Some(&auth),
        None,
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = call(&server, "GET", "/v2/rooms/garbage", Some(&auth), None).await;
    assert_eq!(status, 400);
    // The admin key gets no ticket (tickets are per player), and may destroy any room.
    let (status, _) = call(
        &server,
        "GET",
        &format!("/v2/rooms/{mine}/connection"),
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = call(
        &server,
        "DELETE",
        &format!("/v2/rooms/{servers}"),
        Some(&auth),
        None,
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = call(
        &server,
        "DELETE",
        &format!("/v2/rooms/{servers}"),
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(status, 204);
    // A destroyed room is gone for joins too (code 4).
    let late = p
        .request(json!({"match_join": {"match_id": servers}}))
        .await;
    assert_eq!(error_code(&late), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tickets_are_single_use_personal_and_expiring() {
    let (server, _db) = server(|c| c.matches.join_token_key = "test-join-key".into()).await;
    let a = Client::connect(&server, "ticket-a").await;
    let mut b = Client::connect(&server, "ticket-b").await;
    let room = create_room(&server, &bearer(&a), 1).await;
    let info = connection(&server, &bearer(&a), &room).await;
    let ticket = info["ticket"].as_str().expect("ticket").to_owned();

    // Someone else's ticket is refused (and not used up).
    let stolen = b.request(json!({"match_join": {"token": ticket}})).await;
    assert_eq!(error_code(&stolen), 3);
    // First use works (over TCP); second use is refused, the connection closed.
    let mut first = Tcp::connect(tcp_addr(&info)).await;
    first.send(&join_with_token("1", &ticket)).await;
    first.next_kind("match").await;
    let mut again = Tcp::connect(tcp_addr(&info)).await;
    again.send(&join_with_token("2", &ticket)).await;
    let seen = again.until_closed().await;
    let refusal = error_of(&seen);
    assert_eq!(refusal.0, code::MATCH_JOIN_REJECTED);
    assert!(refusal.1.contains("already used"), "{refusal:?}");
    // A fresh ticket to a full room: code 5, and the ticket stays usable for later.
    let info_b = connection(&server, &bearer(&b), &room).await;
    let full = b
        .request(json!({"match_join": {"token": info_b["ticket"]}}))
        .await;
    assert_eq!(error_code(&full), 5, "{full}");
    // An expired ticket, signed with the server's key.
    let metrics = std::sync::Arc::new(muster::matches::metrics::MatchMetrics::register(
        &prometheus_registry(),
    ));
    let tokens = muster::matches::join_tokens::JoinTokens::new("test-join-key", 60, metrics);
    let id = muster::matches::id::MatchId::parse(&room, "muster").expect("id");
    let user = uuid::Uuid::parse_str(&b.user_id).expect("uuid");
    let expired = tokens.issue_until(id, user, "b", muster::base::clock::now_secs() - 1);
    let reply = b.request(json!({"match_join": {"token": expired}})).await;
    assert_eq!(error_code(&reply), 5);
    assert!(reply["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("expired"));
    // The room is unharmed: its one player still gets states.
    first.next_kind("match_data").await;
}

fn prometheus_registry() -> prometheus::Registry {
    prometheus::Registry::new()
}

fn error_of(envelopes: &[Envelope]) -> (i32, String) {
    envelopes
        .iter()
        .find_map(|e| match &e.message {
            Some(Message::Error(err)) => Some((err.code, err.message.clone())),
            _ => None,
        })
        .expect("an error envelope")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_bad_frames_are_refused() {
    let (server, _db) = server(|c| c.socket.max_message_size_bytes = 600).await;
    let mut p = Client::connect(&server, "tcp-bad").await;
    let room = create_room(&server, &bearer(&p), 2).await;
    let info = connection(&server, &bearer(&p), &room).await;
    let addr = tcp_addr(&info);
    // First frame not a join: error, closed.
    let mut c = Tcp::connect(addr).await;
    c.send(&Envelope::new("1", Message::Ping(Ping {}))).await;
    assert_eq!(error_of(&c.until_closed().await).0, code::BAD_INPUT);
    // A length over the limit: error, closed.
    let mut c = Tcp::connect(addr).await;
    c.send_raw(&[0xff, 0x7f]).await;
    let (code_seen, message) = error_of(&c.until_closed().await);
    assert_eq!(code_seen, code::BAD_INPUT);
    assert!(message.contains("longer than"), "{message}");
    // A join, then garbage inside a well-framed frame: an error, the connection stays.
    let mut c = Tcp::connect(addr).await;
    c.send(&join_with_token(
        "1",
        info["ticket"].as_str().expect("ticket"),
    ))
    .await;
    c.next_kind("match").await;
    c.send_raw(&[3, 0xff, 0xff, 0xff]).await;
    let error = c.next_kind("error").await;
    let Some(Message::Error(e)) = error.message else {
        unreachable!()
    };
    assert_eq!(e.code, code::BAD_INPUT);
    c.send(&Envelope::new("ok", Message::Ping(Ping {}))).await;
    assert_eq!(c.next_kind("pong").await.cid, "ok");
    // Oversized match data inside the match: refused, the match unharmed.
    let mut big = input_envelope(&room, 1, 1, 0);
    if let Some(Message::MatchDataSend(d)) = big.message.as_mut() {
        d.data = vec![0; 2000];
    }
    let mut encoded = Vec::new();
    muster_proto::frame::encode_frame(&big, &mut encoded);
    c.send_raw(&encoded).await;
    let (code_seen, _) = error_of(&c.until_closed().await);
    assert_eq!(
        code_seen,
        code::BAD_INPUT,
        "a frame over max_message_size_bytes closes"
    );
    p.sync().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_rooms_expire() {
    let (server, _db) = server(|c| c.matches.empty_timeout_ms = 200).await;
    let p = Client::connect(&server, "rooms-expire").await;
    let room = create_room(&server, &bearer(&p), 2).await;
    support::eventually_within(
        "the empty room to expire",
        Duration::from_secs(5),
        || async {
            let path = format!("/v2/rooms/{room}");
            call(&server, "GET", &path, Some(&bearer(&p)), None).await.0 == 404
        },
    )
    .await;
}

/// A native TCP session that joined a chat channel leaves it when its connection closes: the
/// other members get the leave event and a later joiner sees no ghost presence. (Before the
/// transports shared one cleanup path, only the WebSocket left its channels.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_session_leaves_its_chat_channels_on_close() {
    let (server, _db) = server(|_| {}).await;
    let tcp_player = Client::connect(&server, "chat-tcp").await;
    let mut watcher = Client::connect(&server, "chat-watcher").await;
    let room = create_room(&server, &bearer(&tcp_player), 2).await;
    let info = connection(&server, &bearer(&tcp_player), &room).await;
    // The TCP player's WebSocket is not needed any more: only its TCP session remains.
    let tcp_user = tcp_player.user_id.clone();
    tcp_player.close().await;

    let mut tcp = Tcp::connect(tcp_addr(&info)).await;
    tcp.send(&join_with_token(
        "1",
        info["ticket"].as_str().expect("ticket"),
    ))
    .await;
    tcp.next_kind("match").await;
    tcp.send(&Envelope::new(
        "2",
        Message::ChannelJoin(muster_proto::realtime::ChannelJoin {
            target: "lobby".into(),
            r#type: muster_proto::realtime::channel_type::ROOM,
            ..Default::default()
        }),
    ))
    .await;
    let joined = tcp.next_kind("channel").await;
    assert_eq!(joined.cid, "2");

    let seen = watcher
        .request(json!({"channel_join": {"target": "lobby", "type": 1}}))
        .await;
    assert_eq!(present_users(&seen), vec![tcp_user.clone()], "{seen}");

    drop(tcp);
    let event = watcher.next("channel_presence_event").await;
    let leaves = &event["channel_presence_event"]["leaves"];
    assert_eq!(leaves[0]["user_id"], json!(tcp_user), "{event}");

    let mut late = Client::connect(&server, "chat-late").await;
    let seen = late
        .request(json!({"channel_join": {"target": "lobby", "type": 1}}))
        .await;
    assert_eq!(
        present_users(&seen),
        vec![watcher.user_id.clone()],
        "no ghost: {seen}"
    );
}

/// The user ids a `channel` answer lists as present.
fn present_users(answer: &Value) -> Vec<String> {
    answer["channel"]["presences"]
        .as_array()
        .expect("presences")
        .iter()
        .filter_map(|p| p["user_id"].as_str().map(str::to_owned))
        .collect()
}

/// A burst of inputs that finds the match's queue full (the match is behind, the player within
/// its rate) is shed and counted, with no error to the player, as Nakama drops data its match
/// cannot queue; the player's connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_a_full_match_queue_cannot_take_are_shed_without_an_error() {
    let (server, _db) = server(|c| {
        c.matches.input_queue_size = 1;
        c.matches.max_inputs_per_sec = 10_000;
        c.matches.input_burst = 10_000;
    })
    .await;
    let ws = Client::connect(&server, "room-shed").await;
    let room = create_room(&server, &bearer(&ws), 2).await;
    let info = connection(&server, &bearer(&ws), &room).await;
    let mut a = Tcp::connect(tcp_addr(&info)).await;
    a.send(&join_with_token(
        "1",
        info["ticket"].as_str().expect("ticket"),
    ))
    .await;
    a.next_kind("match").await;
    // 200 inputs in one write: the match (20 Hz) takes one per tick into its queue of 1.
    let mut burst = Vec::new();
    for seq in 0..200 {
        muster_proto::frame::encode_frame(&input_envelope(&room, seq, 1, 0), &mut burst);
    }
    a.send_raw(&burst).await;
    a.send(&Envelope::new("after", Message::Ping(Ping {})))
        .await;
    // Everything up to the ping's answer is the match's own traffic, never an error.
    loop {
        let envelope = a.next().await.expect("still connected");
        match envelope.message {
            Some(Message::Pong(_)) => {
                assert_eq!(envelope.cid, "after");
                break;
            }
            Some(Message::Error(error)) => panic!("an input burst got an error: {error:?}"),
            _ => {}
        }
    }
    let shed = support::metrics::metric(
        &server,
        r#"muster_match_inputs_dropped_total{reason="queue_full"}"#,
    )
    .await;
    assert!(shed > 0.0, "the shed inputs are counted");
}
