//! Chat channels over real sockets: every envelope (join, leave, send, update, remove, presence
//! events), hidden members, persistence on and off, history paging in both directions, direct
//! chats, every limit and bad input, metrics, and acknowledged messages surviving `kill -9`.

use crate::support;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use muster::config::Config;
use muster_proto::realtime::{self as rt, Envelope, Message as Kind};
use serde_json::{json, Value};
use support::{
    assert_error, eventually, free_port, metric, muster_command, Backend, Binary, Client, Database,
    TestServer,
};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{connect_async, MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

on_both_backends!(
    update_and_remove_only_by_the_sender,
    persistence_on_and_off,
    history_pages_both_ways_with_cursors,
    history_refuses_bad_requests,
    direct_chats,
    acknowledged_messages_survive_kill_9,
);

/// Chat requests the tests make again and again.
trait Chat {
    async fn join(&mut self, room: &str, persistence: bool, hidden: bool) -> Value;
    async fn send_text(&mut self, channel_id: &str, text: &str) -> Value;
}

impl Chat for Client {
    async fn join(&mut self, room: &str, persistence: bool, hidden: bool) -> Value {
        self.ok(
            "channel_join",
            json!({"target": room, "type": 1, "persistence": persistence, "hidden": hidden}),
            "channel",
        )
        .await
    }

    async fn send_text(&mut self, channel_id: &str, text: &str) -> Value {
        let content = json!({ "text": text }).to_string();
        self.ok(
            "channel_message_send",
            json!({"channel_id": channel_id, "content": content}),
            "channel_message_ack",
        )
        .await
    }
}

fn presences(channel: &Value) -> Vec<String> {
    channel["presences"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| p["user_id"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn content_text(message: &Value) -> String {
    let content: Value =
        serde_json::from_str(message["content"].as_str().expect("content is a string"))
            .expect("content is JSON");
    content["text"].as_str().unwrap_or("").to_owned()
}

async fn sqlite_server() -> (Database, TestServer) {
    server_with(Backend::Sqlite, |_| {}).await
}

async fn server_with(backend: Backend, adjust: impl FnOnce(&mut Config)) -> (Database, TestServer) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    adjust(&mut config);
    let server = TestServer::start(config).await;
    (db, server)
}

/// `GET /v2/channel/{id}` with a query string: (status, body).
async fn history(server: &TestServer, token: &str, channel_id: &str, query: &str) -> (u16, Value) {
    let path = format!("/v2/channel/{channel_id}?{query}");
    server.get_with_token(&path, token).await
}

fn history_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|a| a.iter().map(content_text).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn room_join_send_leave_and_presence() {
    let (_db, server) = sqlite_server().await;
    let mut alice = Client::connect(&server, "chat-alice").await;
    let mut bob = Client::connect(&server, "chat-bob").await;

    let channel = alice.join("lobby", false, false).await;
    assert_eq!(channel["id"], "2...lobby");
    assert_eq!(channel["room_name"], "lobby");
    assert!(presences(&channel).is_empty(), "alone: {channel}");
    assert_eq!(channel["self"]["user_id"], alice.user_id.as_str());
    assert_eq!(channel["self"]["username"], alice.username.as_str());
    assert!(channel["self"]["session_id"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));

    let channel = bob.join("lobby", false, false).await;
    assert_eq!(
        presences(&channel),
        [alice.user_id.clone()],
        "bob sees alice"
    );
    let joined = alice.event("channel_presence_event").await;
    assert_eq!(joined["channel_id"], "2...lobby");
    assert_eq!(joined["room_name"], "lobby");
    assert_eq!(joined["joins"][0]["user_id"], bob.user_id.as_str());
    assert_eq!(joined["joins"][0]["username"], bob.username.as_str());
    assert!(joined.get("leaves").is_none(), "{joined}");
    bob.sync().await;
    assert!(
        bob.take("channel_presence_event").is_empty(),
        "no event about oneself"
    );

    let ack = bob.send_text("2...lobby", "hello").await;
    assert_eq!(ack["channel_id"], "2...lobby");
    assert_eq!(ack["code"], 0);
    assert_eq!(ack["persistent"], false);
    assert_eq!(ack["username"], bob.username.as_str());
    assert_eq!(ack["room_name"], "lobby");
    let message_id = ack["message_id"].as_str().expect("message id").to_owned();
    assert!(uuid::Uuid::parse_str(&message_id).is_ok(), "{message_id}");
    assert!(ack["create_time"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    let (bob_id, bob_name) = (bob.user_id.clone(), bob.username.clone());
    for player in [&mut alice, &mut bob] {
        let message = player.event("channel_message").await;
        assert_eq!(message["message_id"], message_id.as_str());
        assert_eq!(message["sender_id"], bob_id.as_str());
        assert_eq!(message["username"], bob_name.as_str());
        assert_eq!(message["code"], 0);
        assert_eq!(message["persistent"], false);
        assert_eq!(message["room_name"], "lobby");
        assert_eq!(message["create_time"], ack["create_time"]);
        assert_eq!(content_text(&message), "hello");
    }

    // A leave answers with the bare cid and tells the others.
    let left = bob
        .call("channel_leave", json!({"channel_id": "2...lobby"}))
        .await;
    let cid = left["cid"].as_str().expect("the leave's cid").to_owned();
    assert!(!cid.is_empty());
    assert_eq!(left, json!({ "cid": cid }), "nothing but the cid");
    let event = alice.event("channel_presence_event").await;
    assert_eq!(event["leaves"][0]["user_id"], bob.user_id.as_str());
    assert!(event.get("joins").is_none());
    // Bob no longer gets the room's messages.
    alice.send_text("2...lobby", "bye").await;
    bob.sync().await;
    assert!(bob.take("channel_message").is_empty());

    // A disconnect is a leave too.
    let mut carol = Client::connect(&server, "chat-carol").await;
    carol.join("lobby", false, false).await;
    let event = alice.event("channel_presence_event").await;
    assert_eq!(event["joins"][0]["user_id"], carol.user_id.as_str());
    let carol_id = carol.user_id.clone();
    drop(carol);
    let event = alice.event("channel_presence_event").await;
    assert_eq!(event["leaves"][0]["user_id"], carol_id.as_str());

    // The last member out removes the channel.
    eventually("one channel, one member", || async {
        metric(&server, "muster_chat_channels").await == 1.0
            && metric(&server, "muster_chat_members").await == 1.0
    })
    .await;
    drop(alice);
    eventually("no channel left", || async {
        metric(&server, "muster_chat_channels").await == 0.0
            && metric(&server, "muster_chat_members").await == 0.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejoin_changes_nothing_and_channels_are_separate() {
    let (_db, server) = sqlite_server().await;
    let mut alice = Client::connect(&server, "chat-rejoin-a").await;
    let mut bob = Client::connect(&server, "chat-rejoin-b").await;
    alice.join("one", false, false).await;
    bob.join("one", false, false).await;
    bob.join("two", false, false).await;
    alice.event("channel_presence_event").await;
    // Joining again answers the same channel and announces nothing.
    let again = bob.join("one", true, true).await;
    assert_eq!(again["id"], "2...one");
    assert_eq!(presences(&again), [alice.user_id.clone()]);
    alice.sync().await;
    assert!(alice.take("channel_presence_event").is_empty());
    // The first join's flags stay: messages are still not persisted.
    let ack = bob.send_text("2...one", "x").await;
    assert_eq!(ack["persistent"], false);
    // A message in "two" does not reach "one"'s other member.
    bob.send_text("2...two", "only two").await;
    alice.event("channel_message").await;
    alice.sync().await;
    assert!(alice.take("channel_message").is_empty(), "nothing from two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_and_json_members_get_the_same_message() {
    let (_db, server) = sqlite_server().await;
    let mut alice = Client::connect(&server, "chat-json").await;
    alice.join("mixed", false, false).await;
    let (token, _) = server.device_session("chat-protobuf").await;
    let (mut binary, _) = connect_async(server.ws_url(&format!("token={token}&format=protobuf")))
        .await
        .expect("connect");
    let join = Envelope::new(
        "1",
        Kind::ChannelJoin(rt::ChannelJoin {
            target: "mixed".into(),
            r#type: rt::channel_type::ROOM,
            persistence: Some(false),
            hidden: None,
        }),
    );
    binary
        .send(Message::binary(rt::encode_protobuf(&join)))
        .await
        .expect("send");
    async fn next(binary: &mut Socket) -> Envelope {
        loop {
            match binary.next().await.expect("open").expect("frame") {
                Message::Binary(bytes) => return rt::decode_protobuf(&bytes).expect("protobuf"),
                Message::Ping(_) => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    let reply = next(&mut binary).await;
    assert!(
        matches!(&reply.message, Some(Kind::Channel(c)) if c.id == "2...mixed" && c.presences.len() == 1),
        "{reply:?}"
    );
    alice.event("channel_presence_event").await;
    let ack = alice.send_text("2...mixed", "to both formats").await;
    let message = next(&mut binary).await;
    let Some(Kind::ChannelMessage(m)) = message.message else {
        panic!("a channel message: {message:?}")
    };
    assert_eq!(m.message_id, ack["message_id"].as_str().expect("id"));
    assert_eq!(m.code, Some(0));
    assert_eq!(m.content, json!({"text": "to both formats"}).to_string());
    assert_eq!(m.room_name, "mixed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_members_are_never_announced() {
    let (_db, server) = sqlite_server().await;
    let mut alice = Client::connect(&server, "chat-hidden-a").await;
    let mut ghost = Client::connect(&server, "chat-hidden-g").await;
    alice.join("quiet", false, false).await;
    let channel = ghost.join("quiet", false, true).await;
    assert_eq!(
        presences(&channel),
        [alice.user_id.clone()],
        "a hidden member sees others"
    );
    alice.sync().await;
    assert!(
        alice.take("channel_presence_event").is_empty(),
        "no join event"
    );
    let mut bob = Client::connect(&server, "chat-hidden-b").await;
    let channel = bob.join("quiet", false, false).await;
    assert_eq!(
        presences(&channel),
        [alice.user_id.clone()],
        "the hidden member is not listed"
    );
    // The hidden member still gets events and messages.
    let event = ghost.event("channel_presence_event").await;
    assert_eq!(event["joins"][0]["user_id"], bob.user_id.as_str());
    bob.send_text("2...quiet", "psst").await;
    assert_eq!(content_text(&ghost.event("channel_message").await), "psst");
    // Its leave is silent too.
    ghost
        .call("channel_leave", json!({"channel_id": "2...quiet"}))
        .await;
    alice.sync().await;
    let events = alice.take("channel_presence_event");
    assert!(
        events.iter().all(|e| e.get("leaves").is_none()),
        "no leave event: {events:?}"
    );
}

async fn update_and_remove_only_by_the_sender(backend: Backend) {
    let (_db, server) = server_with(backend, |_| {}).await;
    let mut alice = Client::connect(&server, "chat-edit-a").await;
    let mut bob = Client::connect(&server, "chat-edit-b").await;
    for persistence in [true, false] {
        let room = format!("edits-{persistence}");
        let id = format!("2...{room}");
        alice.join(&room, persistence, false).await;
        bob.join(&room, false, false).await;
        let ack = alice.send_text(&id, "first draft").await;
        assert_eq!(ack["persistent"], persistence);
        let message_id = ack["message_id"].as_str().expect("id").to_owned();
        bob.event("channel_message").await;

        // Someone else's message: refused, and nothing is sent to anyone.
        let (code, _, reason) = bob
            .refused(
                "channel_message_update",
                json!({"channel_id": id, "message_id": message_id, "content": "{\"text\":\"mine now\"}"}),
            )
            .await;
        assert_eq!((code, reason.as_str()), (3, "message_not_found"));
        let (_, _, reason) = bob
            .refused(
                "channel_message_remove",
                json!({"channel_id": id, "message_id": message_id}),
            )
            .await;
        assert_eq!(reason, "message_not_found");
        // An id from another channel does not verify here either.
        let (_, _, reason) = alice
            .refused(
                "channel_message_remove",
                json!({"channel_id": "2...elsewhere", "message_id": message_id}),
            )
            .await;
        assert_eq!(reason, "not_joined");

        let updated = alice
            .ok(
                "channel_message_update",
                json!({"channel_id": id, "message_id": message_id, "content": "{\"text\":\"final\"}"}),
                "channel_message_ack",
            )
            .await;
        assert_eq!(updated["code"], 1);
        assert_eq!(updated["message_id"], message_id.as_str());
        assert_eq!(
            updated["create_time"], ack["create_time"],
            "creation time kept"
        );
        let seen = bob.event("channel_message").await;
        assert_eq!(seen["code"], 1);
        assert_eq!(seen["message_id"], message_id.as_str());
        assert_eq!(seen["sender_id"], alice.user_id.as_str());
        assert_eq!(content_text(&seen), "final");
        assert_eq!(seen["create_time"], ack["create_time"]);
        if persistence {
            let (status, body) = history(&server, &bob.token, &id, "limit=10").await;
            assert_eq!(status, 200, "{body}");
            assert_eq!(history_texts(&body), ["final"], "history holds the update");
            assert_eq!(
                body["messages"][0]["code"], 0,
                "the stored message keeps code 0"
            );
        }

        let removed = alice
            .ok(
                "channel_message_remove",
                json!({"channel_id": id, "message_id": message_id}),
                "channel_message_ack",
            )
            .await;
        assert_eq!(removed["code"], 2);
        let seen = bob.event("channel_message").await;
        assert_eq!(
            (seen["code"].as_i64(), seen["content"].as_str()),
            (Some(2), Some("{}"))
        );
        if persistence {
            let (_, body) = history(&server, &bob.token, &id, "limit=10").await;
            assert!(
                history_texts(&body).is_empty(),
                "removed from history: {body}"
            );
            // Gone: a second remove finds nothing.
            let (_, _, reason) = alice
                .refused(
                    "channel_message_remove",
                    json!({"channel_id": id, "message_id": message_id}),
                )
                .await;
            assert_eq!(reason, "message_not_found");
        }
    }
    let (_, _, reason) = alice
        .refused(
            "channel_message_update",
            json!({"channel_id": "2...edits-true", "message_id": "not-a-uuid", "content": "{}"}),
        )
        .await;
    assert_eq!(reason, "invalid_message_id");
    let (_, _, reason) = alice
        .refused(
            "channel_message_update",
            json!({"channel_id": "2...edits-true", "message_id": uuid::Uuid::new_v4().to_string(), "content": "{}"}),
        )
        .await;
    assert_eq!(
        reason, "message_not_found",
        "a random UUID is not one of ours"
    );
}

async fn persistence_on_and_off(backend: Backend) {
    let (_db, server) = server_with(backend, |_| {}).await;
    let mut keeper = Client::connect(&server, "chat-keep").await;
    let mut ephemeral = Client::connect(&server, "chat-ephemeral").await;
    // Nakama's default when the flag is absent is to persist.
    let channel = keeper
        .ok(
            "channel_join",
            json!({"target": "mixed", "type": 1}),
            "channel",
        )
        .await;
    assert_eq!(channel["self"]["persistence"], true);
    ephemeral.join("mixed", false, false).await;
    let inserts = "muster_db_operation_duration_seconds_count{op=\"insert_channel_message\"}";
    let before = metric(&server, inserts).await;
    let ack = ephemeral.send_text("2...mixed", "gone with the wind").await;
    assert_eq!(ack["persistent"], false);
    assert_eq!(
        metric(&server, inserts).await,
        before,
        "a message that is not persisted never touches the database"
    );
    let ack = keeper.send_text("2...mixed", "for the record").await;
    assert_eq!(ack["persistent"], true);
    assert_eq!(metric(&server, inserts).await, before + 1.0);
    // The ack of a persisted message comes after its write: it is listed at once.
    let (status, body) = history(&server, &ephemeral.token, "2...mixed", "limit=10").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(history_texts(&body), ["for the record"]);
    let stored = &body["messages"][0];
    assert_eq!(stored["message_id"], ack["message_id"]);
    assert_eq!(stored["sender_id"], keeper.user_id.as_str());
    assert_eq!(stored["username"], keeper.username.as_str());
    assert_eq!(stored["persistent"], true);
    assert_eq!(stored["room_name"], "mixed");
    assert_eq!(stored["create_time"], ack["create_time"]);
    let live = ephemeral.event("channel_message").await;
    assert_eq!(
        live["persistent"], false,
        "the first live message was the ephemeral one"
    );
}

async fn history_pages_both_ways_with_cursors(backend: Backend) {
    let (_db, server) = server_with(backend, |c| c.chat.messages_per_sec = 0).await;
    let mut writer = Client::connect(&server, "chat-history").await;
    writer.join("annals", true, false).await;
    for i in 1..=7 {
        writer.send_text("2...annals", &format!("m{i}")).await;
    }
    let token = writer.token.clone();
    let get = |query: String| {
        let (server, token) = (&server, &token);
        async move {
            let (status, body) = history(server, token, "2...annals", &query).await;
            assert_eq!(status, 200, "{query}: {body}");
            body
        }
    };
    let cursor = |body: &Value, key: &str| body[key].as_str().map(str::to_owned);

    // Oldest first.
    let p1 = get("limit=3&forward=true".into()).await;
    assert_eq!(history_texts(&p1), ["m1", "m2", "m3"]);
    assert!(cursor(&p1, "prev_cursor").is_none());
    let p2 = get(format!(
        "limit=3&forward=true&cursor={}",
        cursor(&p1, "next_cursor").expect("next")
    ))
    .await;
    assert_eq!(history_texts(&p2), ["m4", "m5", "m6"]);
    let p3 = get(format!(
        "limit=3&forward=true&cursor={}",
        cursor(&p2, "next_cursor").expect("next")
    ))
    .await;
    assert_eq!(history_texts(&p3), ["m7"]);
    assert!(cursor(&p3, "next_cursor").is_none(), "the end: {p3}");
    let back = get(format!(
        "limit=3&forward=true&cursor={}",
        cursor(&p3, "prev_cursor").expect("prev")
    ))
    .await;
    assert_eq!(history_texts(&back), ["m4", "m5", "m6"]);
    let first = get(format!(
        "limit=3&forward=true&cursor={}",
        cursor(&back, "prev_cursor").expect("prev")
    ))
    .await;
    assert_eq!(history_texts(&first), ["m1", "m2", "m3"]);
    assert!(
        cursor(&first, "prev_cursor").is_none(),
        "the start: {first}"
    );

    // Newest first.
    let n1 = get("limit=3&forward=false".into()).await;
    assert_eq!(history_texts(&n1), ["m7", "m6", "m5"]);
    let n2 = get(format!(
        "limit=3&forward=false&cursor={}",
        cursor(&n1, "next_cursor").expect("next")
    ))
    .await;
    assert_eq!(history_texts(&n2), ["m4", "m3", "m2"]);
    let n3 = get(format!(
        "limit=3&forward=false&cursor={}",
        cursor(&n2, "next_cursor").expect("next")
    ))
    .await;
    assert_eq!(history_texts(&n3), ["m1"]);
    assert!(cursor(&n3, "next_cursor").is_none());
    let nb = get(format!(
        "limit=3&forward=false&cursor={}",
        cursor(&n3, "prev_cursor").expect("prev")
    ))
    .await;
    assert_eq!(history_texts(&nb), ["m4", "m3", "m2"]);

    // Defaults: limit 1, oldest first.
    assert_eq!(history_texts(&get(String::new()).await), ["m1"]);

    // The cacheable cursor lists what arrives later.
    let all = get("limit=100".into()).await;
    assert_eq!(history_texts(&all).len(), 7);
    let cacheable = cursor(&all, "cacheable_cursor").expect("cacheable");
    let nothing = get(format!("limit=100&cursor={cacheable}")).await;
    assert!(history_texts(&nothing).is_empty());
    writer.send_text("2...annals", "m8").await;
    writer.send_text("2...annals", "m9").await;
    let newer = get(format!("limit=100&cursor={cacheable}")).await;
    assert_eq!(history_texts(&newer), ["m8", "m9"]);
}

async fn history_refuses_bad_requests(backend: Backend) {
    let (_db, server) = server_with(backend, |_| {}).await;
    let mut alice = Client::connect(&server, "chat-history-bad").await;
    alice.join("logbook", true, false).await;
    alice.send_text("2...logbook", "one").await;
    alice.send_text("2...logbook", "two").await;
    let token = alice.token.clone();
    let (_, page) = history(&server, &token, "2...logbook", "limit=1").await;
    let next = page["next_cursor"].as_str().expect("next").to_owned();
    for (channel, query, status, code, hint) in [
        ("2...logbook", "limit=0".to_string(), 400, 3, "limit"),
        ("2...logbook", "limit=101".to_string(), 400, 3, "limit"),
        ("2...logbook", "limit=many".to_string(), 400, 3, "query"),
        ("2...logbook", "forward=maybe".to_string(), 400, 3, "query"),
        ("2...logbook", "cursor=%21%21".to_string(), 400, 3, "cursor"),
        (
            "2...other",
            format!("cursor={next}"),
            400,
            3,
            "another channel",
        ),
        (
            "2...logbook",
            format!("forward=false&cursor={next}"),
            400,
            3,
            "direction",
        ),
        ("lobby", String::new(), 400, 3, "channel"),
        ("9.x.y.", String::new(), 400, 3, "channel"),
        ("3.some-group..", String::new(), 403, 7, "members"),
    ] {
        let result = history(&server, &token, channel, &query).await;
        let message = assert_error(&result, status, code);
        assert!(
            message.to_lowercase().contains(hint),
            "{channel}?{query}: {message}"
        );
    }
    let unauthenticated = server
        .http
        .get(server.url("/v2/channel/2...logbook"))
        .send()
        .await
        .expect("request");
    assert_error(&support::status_and_json(unauthenticated).await, 401, 16);
    // An empty room's history is an empty page, not an error.
    let (status, body) = history(&server, &token, "2...empty", "limit=5").await;
    assert_eq!((status, body), (200, json!({})));
}

async fn direct_chats(backend: Backend) {
    let (_db, server) = server_with(backend, |_| {}).await;
    let mut alice = Client::connect(&server, "chat-dm-a").await;
    let mut bob = Client::connect(&server, "chat-dm-b").await;
    let carol = Client::connect(&server, "chat-dm-c").await;
    let dm = |target: &str| json!({"target": target, "type": 2, "persistence": true});
    let channel = alice.ok("channel_join", dm(&bob.user_id), "channel").await;
    let (one, two) = if alice.user_id < bob.user_id {
        (alice.user_id.clone(), bob.user_id.clone())
    } else {
        (bob.user_id.clone(), alice.user_id.clone())
    };
    let id = format!("4.{one}.{two}.");
    assert_eq!(channel["id"], id.as_str());
    assert_eq!(channel["user_id_one"], one.as_str());
    assert_eq!(channel["user_id_two"], two.as_str());
    let bobs = bob.ok("channel_join", dm(&alice.user_id), "channel").await;
    assert_eq!(bobs["id"], id.as_str(), "both ends name the same channel");
    assert_eq!(presences(&bobs), [alice.user_id.clone()]);
    alice.event("channel_presence_event").await;
    let ack = alice.send_text(&id, "just us").await;
    assert_eq!(ack["user_id_one"], one.as_str());
    let message = bob.event("channel_message").await;
    assert_eq!(content_text(&message), "just us");
    assert_eq!(message["user_id_two"], two.as_str());

    // History: the two users, and no one else.
    for token in [&alice.token, &bob.token] {
        let (status, body) = history(&server, token, &id, "limit=10").await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(history_texts(&body), ["just us"]);
    }
    let result = history(&server, &carol.token, &id, "limit=10").await;
    assert_error(&result, 403, 7);

    // Refused: oneself, someone who does not exist, something that is not a user id.
    for (target, reason) in [
        (alice.user_id.clone(), "invalid_target"),
        (uuid::Uuid::new_v4().to_string(), "user_not_found"),
        ("bob".to_owned(), "invalid_target"),
    ] {
        let (code, _, got) = alice.refused("channel_join", dm(&target)).await;
        assert_eq!((code, got.as_str()), (3, reason), "{target}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_chat_is_refused_to_a_non_member() {
    let (_db, server) = sqlite_server().await;
    let mut alice = Client::connect(&server, "chat-group").await;
    let (code, message, reason) = alice
        .refused(
            "channel_join",
            json!({"target": uuid::Uuid::new_v4().to_string(), "type": 3}),
        )
        .await;
    assert_eq!((code, reason.as_str()), (3, "not_group_member"));
    assert!(message.contains("member"), "{message}");
    let (_, _, reason) = alice
        .refused(
            "channel_message_send",
            json!({"channel_id": "3.some-group..", "content": "{}"}),
        )
        .await;
    assert_eq!(reason, "not_joined");
    assert_eq!(metric(&server, "muster_chat_channels").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_clear_errors_and_disturbs_nothing() {
    let (_db, server) = server_with(Backend::Sqlite, |c| {
        c.chat.max_content_bytes = 64;
        c.chat.max_room_name_chars = 8;
        c.chat.max_channels_per_socket = 2;
    })
    .await;
    let mut alice = Client::connect(&server, "chat-bad-a").await;
    let mut bob = Client::connect(&server, "chat-bad-b").await;
    alice.join("room", false, false).await;
    bob.join("room", false, false).await;
    alice.event("channel_presence_event").await;

    let join = |target: &str, kind: i64| json!({"target": target, "type": kind});
    let send = |channel: &str, content: &str| json!({"channel_id": channel, "content": content});
    let cases: Vec<(&str, Value, &str)> = vec![
        ("channel_join", join("", 1), "invalid_room_name"),
        (
            "channel_join",
            join("much-too-long", 1),
            "invalid_room_name",
        ),
        ("channel_join", join("bell\u{7}", 1), "invalid_room_name"),
        ("channel_join", join("room", 7), "invalid_target"),
        (
            "channel_leave",
            json!({"channel_id": "lobby"}),
            "invalid_channel_id",
        ),
        (
            "channel_leave",
            json!({"channel_id": "2...nowhere"}),
            "not_joined",
        ),
        ("channel_leave", json!({}), "invalid_channel_id"),
        (
            "channel_message_send",
            send("2...nowhere", "{}"),
            "not_joined",
        ),
        (
            "channel_message_send",
            send("garbage", "{}"),
            "invalid_channel_id",
        ),
        (
            "channel_message_send",
            send("2...room", "hello"),
            "content_not_object",
        ),
        (
            "channel_message_send",
            send("2...room", "[1,2]"),
            "content_not_object",
        ),
        (
            "channel_message_send",
            send("2...room", ""),
            "content_not_object",
        ),
        (
            "channel_message_send",
            send("2...room", "{\"a\":1} trailing"),
            "content_not_object",
        ),
        (
            "channel_message_send",
            send("2...room", &json!({"text": "x".repeat(100)}).to_string()),
            "content_too_large",
        ),
        (
            "channel_message_update",
            json!({"channel_id": "2...room", "message_id": "", "content": "{}"}),
            "invalid_message_id",
        ),
        (
            "channel_message_remove",
            json!({"channel_id": "4.a.b.", "message_id": uuid::Uuid::new_v4().to_string()}),
            "not_joined",
        ),
    ];
    for (kind, body, reason) in cases {
        let (code, message, got) = alice.refused(kind, body.clone()).await;
        assert_eq!(
            (code, got.as_str()),
            (3, reason),
            "{kind} {body}: {message}"
        );
    }
    // Malformed envelopes of chat kinds are refused by the decoder, the socket stays.
    alice
        .socket
        .send(Message::text(
            r#"{"cid":"x","channel_join":{"type":"room"}}"#,
        ))
        .await
        .expect("send");
    let reply = alice.frame().await;
    assert_eq!(reply["error"]["code"], 3, "{reply}");
    // The joins cap: "room" is one, a second is fine, a third is refused.
    alice.join("second", false, false).await;
    let (_, message, reason) = alice.refused("channel_join", join("third", 1)).await;
    assert_eq!(reason, "too_many_channels");
    assert!(message.contains('2'), "{message}");
    // Server-only kinds are refused.
    let (code, _, _) = alice.refused("channel_message", json!({})).await;
    assert_eq!(code, 1);

    // None of it reached bob, and both sockets still work.
    bob.sync().await;
    assert!(bob.take("channel_message").is_empty());
    assert!(bob.take("channel_presence_event").is_empty());
    alice.send_text("2...room", "still here").await;
    assert_eq!(
        content_text(&bob.event("channel_message").await),
        "still here"
    );
    assert_eq!(
        metric(
            &server,
            "muster_chat_errors_total{reason=\"content_not_object\"}"
        )
        .await,
        4.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_message_rate_is_limited_per_socket() {
    let (_db, server) = server_with(Backend::Sqlite, |c| {
        c.chat.messages_per_sec = 1;
        c.chat.message_burst = 3;
    })
    .await;
    let mut alice = Client::connect(&server, "chat-rate-a").await;
    let mut bob = Client::connect(&server, "chat-rate-b").await;
    alice.join("chatty", false, false).await;
    bob.join("chatty", false, false).await;
    for i in 0..3 {
        alice.send_text("2...chatty", &format!("burst {i}")).await;
    }
    let (code, message, reason) = alice
        .refused(
            "channel_message_send",
            json!({"channel_id": "2...chatty", "content": "{}"}),
        )
        .await;
    assert_eq!((code, reason.as_str()), (3, "rate_limited"));
    assert!(message.contains("1 per second"), "{message}");
    // Another socket has its own budget.
    bob.send_text("2...chatty", "my own budget").await;
    // The refused message went nowhere: bob got alice's 3, then his own.
    let texts: Vec<String> = {
        let mut texts = Vec::new();
        for _ in 0..4 {
            texts.push(content_text(&bob.event("channel_message").await));
        }
        texts
    };
    assert_eq!(texts, ["burst 0", "burst 1", "burst 2", "my own budget"]);
    // The budget refills with time (one token a second): retry until it has.
    let mut wait = support::Wait::new("the bucket to refill", Duration::from_secs(4));
    let send = json!({"channel_id": "2...chatty", "content": "{}"});
    while alice
        .call("channel_message_send", send.clone())
        .await
        .get("channel_message_ack")
        .is_none()
    {
        wait.tick().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_channels_members_and_messages() {
    let (_db, server) = sqlite_server().await;
    let mut players = Vec::new();
    for i in 0..4 {
        let mut p = Client::connect(&server, &format!("chat-metrics-{i}")).await;
        p.join(&format!("group-{}", i % 2), false, false).await;
        players.push(p);
    }
    assert_eq!(metric(&server, "muster_chat_channels").await, 2.0);
    assert_eq!(metric(&server, "muster_chat_members").await, 4.0);
    players[0].send_text("2...group-0", "a").await;
    players[1].send_text("2...group-1", "b").await;
    players[1].send_text("2...group-1", "c").await;
    assert_eq!(
        metric(
            &server,
            "muster_chat_messages_received_total{kind=\"send\"}"
        )
        .await,
        3.0
    );
    assert_eq!(
        metric(&server, "muster_chat_messages_delivered_total").await,
        6.0,
        "each message to both members of its channel"
    );
    assert_eq!(
        metric(&server, "muster_chat_presence_events_delivered_total").await,
        2.0,
        "the second joiner of each room announced to the first"
    );
}

/// The `muster` binary on `db`, listening on `port`, with rate limits off.
async fn start_binary(db: &Database, port: u16) -> Binary {
    let mut command = muster_command(db);
    command.env("MUSTER_CHAT__MESSAGES_PER_SEC", "0");
    Binary::run(command, port).await
}

/// Sends persisted messages as fast as they are acknowledged, recording each acknowledged id,
/// until the connection breaks.
async fn write_until_killed(
    mut player: Client,
    acked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    for i in 0.. {
        let content = json!({ "n": i }).to_string();
        let cid = i.to_string();
        let envelope = json!({"cid": cid, "channel_message_send": {"channel_id": "2...vault", "content": content}});
        if player
            .socket
            .send(Message::text(envelope.to_string()))
            .await
            .is_err()
        {
            return;
        }
        loop {
            let Some(Ok(frame)) = player.socket.next().await else {
                return;
            };
            let Message::Text(text) = frame else { continue };
            let Ok(reply) = serde_json::from_str::<Value>(&text) else {
                return;
            };
            if reply["cid"] != cid.as_str() {
                continue;
            }
            match reply["channel_message_ack"]["message_id"].as_str() {
                Some(id) => acked.lock().expect("lock").push(id.to_owned()),
                None => return,
            }
            break;
        }
    }
}

async fn acknowledged_messages_survive_kill_9(backend: Backend) {
    let db = Database::new(backend).await;
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut binary = start_binary(&db, port).await;
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut writers = Vec::new();
    for w in 0..4 {
        let mut player = Client::connect_at(&addr, &format!("chat-crash-{w}")).await;
        player.join("vault", true, false).await;
        writers.push(tokio::spawn(write_until_killed(player, acked.clone())));
    }
    eventually("300 acknowledged messages", || async {
        acked.lock().expect("lock").len() >= 300
    })
    .await;
    binary.kill9();
    for writer in writers {
        writer.await.expect("writer");
    }
    let acked = acked.lock().expect("lock").clone();

    let binary = start_binary(&db, port).await;
    let reader = Client::connect_at(&addr, "chat-crash-reader").await;
    let mut stored = std::collections::HashSet::new();
    let mut cursor = String::new();
    loop {
        let url = format!("http://{addr}/v2/channel/2...vault?limit=100&cursor={cursor}");
        let page: Value = reqwest::Client::new()
            .get(url)
            .bearer_auth(&reader.token)
            .send()
            .await
            .expect("history")
            .json()
            .await
            .expect("JSON");
        for m in page["messages"].as_array().into_iter().flatten() {
            stored.insert(m["message_id"].as_str().expect("id").to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
    }
    drop(binary);
    let lost: Vec<&String> = acked.iter().filter(|id| !stored.contains(*id)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged messages lost after kill -9",
        lost.len(),
        acked.len()
    );
}

/// Envelopes in lowerCamelCase (`channelJoin`, `channelId`), as protojson accepts them, are
/// answered as their proto-named twins are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn camel_case_envelopes_work_as_snake_case_ones_do() {
    let (_db, server) = sqlite_server().await;
    let mut alice = Client::connect(&server, "chat-camel").await;
    let joined = alice
        .request(json!({"channelJoin": {"target": "camels", "type": 1, "persistence": false}}))
        .await;
    assert_eq!(joined["channel"]["id"], "2...camels", "{joined}");
    let content = json!({"text": "hump"}).to_string();
    let ack = alice
        .request(json!({"channelMessageSend": {"channelId": "2...camels", "content": content}}))
        .await;
    assert_eq!(
        ack["channel_message_ack"]["channel_id"], "2...camels",
        "{ack}"
    );
    let message = alice.event("channel_message").await;
    assert_eq!(content_text(&message), "hump");
    let left = alice
        .request(json!({"channelLeave": {"channelId": "2...camels"}}))
        .await;
    assert!(left.get("error").is_none(), "{left}");
}
