//! The ENet transport over real UDP: a room joined with its ticket, reliable events and
//! unreliable state on their channels, a lossy and reordering link, and bad input (garbage
//! datagrams, wrong and reused tickets, silent peers, connect floods).

use crate::support;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use muster::config::Config;
use muster_proto::arena;
use muster_proto::realtime::{error_code as code, Envelope, MatchDataSend, Message, Ping};
use serde_json::{json, Value};
use support::client::{join_with_token, Client};
use support::enet::{EnetClient, LossyRelay, Received};
use support::{metric, Backend, Database, TestServer};

async fn server(tune: impl FnOnce(&mut Config)) -> (TestServer, Database) {
    let db = Database::new(Backend::Sqlite).await;
    let mut config = db.config();
    tune(&mut config);
    (TestServer::start(config).await, db)
}

async fn create_room(server: &TestServer, player: &Client, capacity: u32) -> String {
    let (status, room) = support::status_and_json(
        server
            .http
            .post(server.url("/v2/rooms"))
            .bearer_auth(&player.token)
            .json(&json!({"handler": "arena", "capacity": capacity, "params": {"tick_rate_hz": "20"}}))
            .send()
            .await
            .expect("create room"),
    )
    .await;
    assert_eq!(status, 201, "{room}");
    room["room_id"].as_str().expect("room id").to_owned()
}

async fn connection(server: &TestServer, player: &Client, room: &str) -> Value {
    let (status, info) = support::status_and_json(
        server
            .http
            .get(server.url(&format!("/v2/rooms/{room}/connection")))
            .bearer_auth(&player.token)
            .send()
            .await
            .expect("connection info"),
    )
    .await;
    assert_eq!(status, 200, "{info}");
    info
}

/// The ENet endpoint of a room's connection info.
fn enet_addr(info: &Value) -> SocketAddr {
    let enet = &info["enet"];
    format!(
        "{}:{}",
        enet["host"].as_str().expect("enet host"),
        enet["port"]
    )
    .parse()
    .expect("ENet address")
}

fn ticket(info: &Value) -> &str {
    info["ticket"].as_str().expect("ticket")
}

fn input(room: &str, seq: u32, dx: i8) -> Envelope {
    Envelope::new(
        "",
        Message::MatchDataSend(MatchDataSend {
            match_id: room.to_owned(),
            op_code: arena::OP_INPUT,
            data: arena::Input { seq, dx, dy: 0 }.encode(),
            reliable: true,
            ..Default::default()
        }),
    )
}

fn error_of(received: Received) -> (i32, String) {
    match received {
        Received::Envelope {
            envelope:
                Envelope {
                    message: Some(Message::Error(error)),
                    ..
                },
            ..
        } => (error.code, error.message),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_joins_a_room_over_enet_and_plays() {
    let (server, _db) = server(|_| {}).await;
    let owner = Client::connect(&server, "enet-owner").await;
    let room = create_room(&server, &owner, 2).await;
    let info = connection(&server, &owner, &room).await;
    let mut player = EnetClient::connect(enet_addr(&info)).await;
    player.send(&join_with_token("1", ticket(&info)));
    let (channel, joined) = player.next_kind("match").await;
    assert_eq!((channel, joined.cid.as_str()), (0, "1"));
    let Some(Message::Match(joined)) = joined.message else {
        unreachable!()
    };
    assert_eq!(joined.match_id, room);
    assert!(joined.authoritative);
    // The welcome is an event: reliable, channel 0.
    let (channel, welcome) = player.next_kind("match_data").await;
    let Some(Message::MatchData(welcome)) = welcome.message else {
        unreachable!()
    };
    assert_eq!(
        (channel, welcome.op_code, welcome.reliable),
        (0, arena::OP_WELCOME, true)
    );
    let slot = arena::Welcome::decode(&welcome.data).expect("welcome").slot;

    // Inputs go in reliably; the state comes back unreliable on channel 1 and shows each applied.
    for seq in 1..=5 {
        player.send(&input(&room, seq, 1));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "inputs never applied"
        );
        let (channel, state) = player.next_kind("match_data").await;
        let Some(Message::MatchData(state)) = state.message else {
            unreachable!()
        };
        if state.op_code != arena::OP_STATE {
            continue;
        }
        assert_eq!((channel, state.reliable), (1, false), "state is unreliable");
        let state = arena::State::decode(&state.data).expect("state");
        let me = state
            .players
            .iter()
            .find(|p| p.slot == slot)
            .expect("me in the state");
        if me.last_seq == 5 {
            assert!(me.x > 0.0, "the inputs moved the player");
            break;
        }
    }
    // Any realtime envelope works once joined: a ping is answered on the reliable channel.
    player.send(&Envelope::new("p", Message::Ping(Ping {})));
    let (channel, pong) = player.next_kind("pong").await;
    assert_eq!((channel, pong.cid.as_str()), (0, "p"));

    player.disconnect().await;
    support::eventually("the close is recorded", || async {
        metric(
            &server,
            "muster_sockets_closed_total{reason=\"enet_client_closed\"}",
        )
        .await
            == 1.0
    })
    .await;
    assert!(metric(&server, "muster_enet_syscalls_total{call=\"sendmmsg\"}").await >= 1.0);
    assert!(metric(&server, "muster_enet_datagrams_total{direction=\"out\"}").await >= 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reliable_data_arrives_once_and_in_order_over_a_lossy_reordering_link() {
    let (server, _db) = server(|_| {}).await;
    let owner = Client::connect(&server, "lossy-owner").await;
    let room = create_room(&server, &owner, 2).await;
    let info = connection(&server, &owner, &room).await;
    // 10 % each way: heavy, yet never so many losses in a row that a peer times out while
    // the other tests of this file flood the same two cores (20 % did, once in a while).
    let relay = LossyRelay::start(enet_addr(&info), 10);
    let mut player = EnetClient::connect(relay.addr).await;
    player.send(&join_with_token("join", ticket(&info)));
    player.next_kind("match").await;
    // 300 pings, each answered with a pong of the same cid: both directions reliable.
    const COUNT: usize = 300;
    for i in 0..COUNT {
        player.send(&Envelope::new(i.to_string(), Message::Ping(Ping {})));
    }
    let mut seen = Vec::new();
    while seen.len() < COUNT {
        let (_, pong) = player.next_kind("pong").await;
        seen.push(pong.cid.parse::<usize>().expect("cid"));
    }
    assert_eq!(seen, (0..COUNT).collect::<Vec<_>>(), "once each, in order");
    assert!(
        relay.dropped.load(std::sync::atomic::Ordering::Relaxed) > 20,
        "the link really lost datagrams"
    );
    // Nothing more: no duplicate came in the next second (the match's states keep coming).
    let quiet_until = tokio::time::Instant::now() + Duration::from_secs(1);
    while tokio::time::Instant::now() < quiet_until {
        let Some(received) = player.next_within(Duration::from_millis(100)).await else {
            continue;
        };
        if let Received::Envelope { envelope, .. } = received {
            assert!(
                !matches!(envelope.message, Some(Message::Pong(_))),
                "a duplicate pong: {envelope:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_first_packets_and_tickets_are_refused_and_disconnected() {
    let (server, _db) = server(|config| config.limits.handshake_timeout_ms = 500).await;
    let owner = Client::connect(&server, "bad-owner").await;
    let room = create_room(&server, &owner, 4).await;
    let info = connection(&server, &owner, &room).await;
    let addr = enet_addr(&info);

    // Not an envelope.
    let mut client = EnetClient::connect(addr).await;
    client.send_raw(0, b"\xff\xff\xff not protobuf");
    let (code, _) = error_of(client.next().await);
    assert_eq!(code, code::BAD_INPUT);
    assert_eq!(client.disconnected().await, 5, "join failed");

    // An envelope, but not a join.
    let mut client = EnetClient::connect(addr).await;
    client.send(&Envelope::new("x", Message::Ping(Ping {})));
    let (code, message) = error_of(client.next().await);
    assert_eq!(code, code::BAD_INPUT, "{message}");
    assert!(message.contains("match_join"), "{message}");
    assert_eq!(client.disconnected().await, 5);

    // A forged ticket.
    let mut client = EnetClient::connect(addr).await;
    client.send(&join_with_token("f", "not.a.ticket"));
    let (code, _) = error_of(client.next().await);
    assert_ne!(code, 0);
    assert_eq!(client.disconnected().await, 5);

    // A ticket used twice: the second join is refused.
    let mut first = EnetClient::connect(addr).await;
    first.send(&join_with_token("1", ticket(&info)));
    first.next_kind("match").await;
    let mut second = EnetClient::connect(addr).await;
    second.send(&join_with_token("2", ticket(&info)));
    let (code, message) = error_of(second.next().await);
    assert_ne!(code, 0, "{message}");
    assert_eq!(second.disconnected().await, 5);

    // A peer that connects and never joins is closed after the handshake timeout.
    let mut silent = EnetClient::connect(addr).await;
    assert_eq!(silent.disconnected().await, 2, "handshake timeout");

    // An oversized packet is refused with an error; the joined session stays.
    first.send_raw(0, &vec![7u8; 5000]);
    let (_, error) = first.next_kind("error").await;
    let (code, message) = error_of(Received::Envelope {
        channel: 0,
        envelope: error,
    });
    assert_eq!(code, code::BAD_INPUT, "{message}");
    first.send(&Envelope::new("still", Message::Ping(Ping {})));
    assert_eq!(first.next_kind("pong").await.1.cid, "still");
    assert_eq!(
        metric(
            &server,
            "muster_sockets_closed_total{reason=\"enet_join_failed\"}"
        )
        .await,
        4.0
    );
    // One larger than ENet reassembles (twice the limit): the error, then the peer is ended
    // (data 4) rather than left with a reliable channel that can never move again.
    first.send_raw(0, &vec![7u8; 20_000]);
    let (_, error) = first.next_kind("error").await;
    assert!(error_of(Received::Envelope {
        channel: 0,
        envelope: error
    })
    .1
    .contains("too big"));
    assert_eq!(first.disconnected().await, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_spoofed_and_flooding_datagrams_are_dropped_and_counted() {
    let (server, _db) = server(|config| {
        config.enet.connects_per_sec = 5;
        config.enet.packets_per_peer_per_sec = 50;
    })
    .await;
    let owner = Client::connect(&server, "flood-owner").await;
    let room = create_room(&server, &owner, 2).await;
    let info = connection(&server, &owner, &room).await;
    let addr = enet_addr(&info);
    let mut player = EnetClient::connect(addr).await;
    player.send(&join_with_token("1", ticket(&info)));
    player.next_kind("match").await;

    let attacker = UdpSocket::bind("127.0.0.1:0").expect("bind");
    // Garbage: too short, compressed, to no peer without connecting.
    for datagram in [
        &[0x01][..],
        &[0x4f, 0xff, 0x82, 0, 0, 0],
        &[0x0f, 0xff, 0x86, 0, 0, 1],
    ] {
        attacker.send_to(datagram, addr).expect("send");
    }
    // A datagram for peer 0 from an address the server never saw.
    attacker
        .send_to(&[0x00, 0x00, 0x86, 0, 0, 1, 0, 0], addr)
        .expect("send");
    // A connect flood from one address: a real CONNECT header, over and over.
    let connect = [0x8f, 0xff, 0, 0, 0x82, 0xff, 0, 1, 0, 0, 0, 0];
    let flooder = UdpSocket::bind("127.0.0.1:0").expect("bind");
    for _ in 0..200 {
        flooder.send_to(&connect, addr).expect("send");
    }
    support::eventually("the bad datagrams are counted", || async {
        metric(&server, "muster_enet_dropped_total{reason=\"malformed\"}").await >= 3.0
            && metric(
                &server,
                "muster_enet_dropped_total{reason=\"unknown_peer\"}",
            )
            .await
                >= 1.0
            && metric(
                &server,
                "muster_enet_dropped_total{reason=\"connect_rate\"}",
            )
            .await
                >= 150.0
    })
    .await;
    // Nothing was answered to the garbage, and a flood's answers are never larger than it.
    attacker
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut buf = [0u8; 2048];
    assert!(
        attacker.recv_from(&mut buf).is_err(),
        "garbage got an answer"
    );
    flooder
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut answers = 0;
    while let Ok((n, _)) = flooder.recv_from(&mut buf) {
        assert!(
            n <= connect.len(),
            "an answer ({n} bytes) larger than the request"
        );
        answers += 1;
    }
    assert!(
        answers <= 10,
        "{answers} answers to a flood held to 5 connects/s"
    );

    // The player's own flood: past its packet budget, datagrams are dropped.
    for i in 0..400 {
        player.send_raw(1, &realtime_ping(i));
    }
    support::eventually("the peer's flood is cut", || async {
        metric(&server, "muster_enet_dropped_total{reason=\"peer_rate\"}").await >= 1.0
    })
    .await;
    // The player is still served.
    player.send(&Envelope::new("alive", Message::Ping(Ping {})));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, pong) = player.next_kind("pong").await;
        if pong.cid == "alive" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline);
    }
}

/// A burst of requests whose answers are more than the outbox holds is answered in full and in
/// order: the peer's task waits for the loop to drain the outbox (the limit is for a client
/// that does not read, not for one that asks many things at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_requests_larger_than_the_outbox_is_answered_in_full() {
    let (server, _db) = server(|config| config.socket.outgoing_queue_size = 4).await;
    let owner = Client::connect(&server, "burst-owner").await;
    let room = create_room(&server, &owner, 2).await;
    let info = connection(&server, &owner, &room).await;
    let mut player = EnetClient::connect(enet_addr(&info)).await;
    player.send(&join_with_token("1", ticket(&info)));
    player.next_kind("match").await;
    for i in 0..100 {
        player.send(&Envelope::new(format!("burst{i}"), Message::Ping(Ping {})));
    }
    for i in 0..100 {
        let (_, pong) = player.next_kind("pong").await;
        assert_eq!(pong.cid, format!("burst{i}"));
    }
    assert_eq!(
        metric(
            &server,
            "muster_sockets_closed_total{reason=\"enet_queue_full\"}"
        )
        .await,
        0.0
    );
}

fn realtime_ping(i: usize) -> Vec<u8> {
    muster_proto::realtime::encode_protobuf(&Envelope::new(
        format!("flood{i}"),
        Message::Ping(Ping {}),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_datagrams_never_break_the_transport() {
    use rand::{Rng as _, SeedableRng as _};
    let (server, _db) = server(|_| {}).await;
    let owner = Client::connect(&server, "random-owner").await;
    let room = create_room(&server, &owner, 2).await;
    let info = connection(&server, &owner, &room).await;
    let addr = enet_addr(&info);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let senders: Vec<UdpSocket> = (0..8)
        .map(|_| UdpSocket::bind("127.0.0.1:0").expect("bind"))
        .collect();
    for i in 0..4000 {
        let len = rng.random_range(0..1500);
        let mut datagram: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        if i % 2 == 0 && datagram.len() >= 8 {
            // A CONNECT header with a random body: past the transport's checks, into ENet's.
            datagram[..6].copy_from_slice(&[0x8f, 0xff, 0, 0, 0x82, 0xff]);
        } else if i % 3 == 0 && datagram.len() >= 4 {
            // Addressed to a low peer id, as a spoofer guessing ids would.
            datagram[0] = 0;
            datagram[1] = rng.random_range(0..4);
        }
        let _ = senders[i % senders.len()].send_to(&datagram, addr);
        if i % 500 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // The transport still serves a real player.
    let mut player = EnetClient::connect(addr).await;
    player.send(&join_with_token("1", ticket(&info)));
    player.next_kind("match").await;
    player.send(&Envelope::new("after", Message::Ping(Ping {})));
    assert_eq!(player.next_kind("pong").await.1.cid, "after");
    assert!(metric(&server, "muster_enet_datagrams_total{direction=\"in\"}").await >= 1000.0);
}
