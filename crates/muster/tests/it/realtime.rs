//! Realtime sockets: the upgrade's checks, envelopes in both formats, bad input, keep-alive,
//! presence, limits and shutdown — a real WebSocket client against a real server.

use crate::support;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use muster_proto::realtime::{self, Envelope, Message as Kind, Ping};
use serde_json::{json, Value};
use support::{assert_error, eventually, metric, next_json, Backend, Database, TestServer};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{connect_async, MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

on_both_backends!(
    upgrade_is_checked_before_accepting,
    json_ping_pong_and_bad_input,
    protobuf_ping_pong,
    oversized_frame_closes_with_1009,
    presence_follows_sockets,
    dead_peer_is_dropped_live_peer_kept,
    shutdown_sends_close_frames,
    client_close_is_answered,
    a_vanished_client_is_counted_apart_from_a_closing_one,
    socket_limit_and_rate_limit,
    metrics_count_sockets,
    a_ban_ends_sockets_and_refuses_tokens,
);

async fn connect(server: &TestServer, token: &str, format: &str) -> Socket {
    let (socket, response) =
        connect_async(server.ws_url(&format!("token={token}&format={format}")))
            .await
            .expect("WebSocket connects");
    assert_eq!(response.status(), 101);
    socket
}

/// Reads until the server's close frame; returns its code and reason.
async fn close_of(socket: &mut Socket) -> (CloseCode, String) {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .expect("close within 5 s")
        {
            Some(Ok(Message::Close(Some(frame)))) => return (frame.code, frame.reason.to_string()),
            Some(Ok(Message::Close(None))) | None => panic!("closed without a close frame"),
            Some(Ok(_)) => continue,
            Some(Err(error)) => panic!("socket error before close frame: {error}"),
        }
    }
}

async fn upgrade_is_checked_before_accepting(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("device-ws-check").await;
    for (query, status) in [
        ("".to_string(), 401),
        ("token=not-a-token".to_string(), 401),
        (format!("token={token}&format=xml"), 400),
    ] {
        let error = connect_async(server.ws_url(&query))
            .await
            .expect_err("refused");
        match error {
            tokio_tungstenite::tungstenite::Error::Http(response) => {
                assert_eq!(response.status(), status, "{query}");
                let body: Value =
                    serde_json::from_slice(response.body().as_deref().unwrap_or_default())
                        .expect("JSON");
                assert!(body["message"].is_string(), "{body}");
            }
            other => panic!("expected an HTTP refusal, got {other}"),
        }
    }
    // A plain GET with a valid token is not an upgrade: a clear 400.
    let plain = server
        .http
        .get(server.url(&format!("/ws?token={token}")))
        .send()
        .await
        .expect("send");
    let result = support::status_and_json(plain).await;
    assert!(assert_error(&result, 400, 3).contains("WebSocket"));
}

async fn json_ping_pong_and_bad_input(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("device-ws-json").await;
    let mut socket = connect(&server, &token, "json").await;

    socket
        .send(Message::text(r#"{"cid":"1","ping":{}}"#))
        .await
        .expect("send");
    assert_eq!(
        next_json(&mut socket).await,
        json!({"cid": "1", "pong": {}})
    );

    let cases = [
        (r#"{"cid":"2","teleport":{}}"#, "2", 1),
        (r#"{"cid":"3"}"#, "3", 2),
        (r#"{"cid":"4","ping":{}"#, "", 3),
        (r#"[1,2,3]"#, "", 3),
        (r#"{"cid":"5","ping":{},"pong":{}}"#, "5", 3),
    ];
    for (frame, cid, code) in cases {
        socket.send(Message::text(frame)).await.expect("send");
        let reply = next_json(&mut socket).await;
        assert_eq!(reply["error"]["code"], code, "{frame} -> {reply}");
        assert!(reply["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
        if cid.is_empty() {
            assert!(reply.get("cid").is_none(), "{reply}");
        } else {
            assert_eq!(reply["cid"], cid, "{reply}");
        }
    }
    // A binary frame is decoded as protobuf; garbage bytes get an error, in the socket's format.
    socket
        .send(Message::binary(vec![0xff, 0xff, 0xff]))
        .await
        .expect("send");
    assert_eq!(next_json(&mut socket).await["error"]["code"], 3);

    // After all that, the socket still works.
    socket
        .send(Message::text(r#"{"cid":"6","ping":{}}"#))
        .await
        .expect("send");
    assert_eq!(
        next_json(&mut socket).await,
        json!({"cid": "6", "pong": {}})
    );
    socket.close(None).await.expect("close");
}

/// RFC 6455 5.5.1: a close from the client is answered with a close, not a dropped connection.
async fn client_close_is_answered(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("device-ws-close").await;
    let mut socket = connect(&server, &token, "json").await;
    socket.close(None).await.expect("close");
    let answer = tokio::time::timeout(Duration::from_secs(5), socket.next())
        .await
        .expect("answer within 5 s");
    assert!(
        matches!(answer, Some(Ok(Message::Close(_)))),
        "expected the server's close frame, got {answer:?}"
    );
}

/// A client that closes is `client_closed`; one that vanishes without a close frame (killed,
/// its network gone) is `connection_reset` — not a protocol error.
async fn a_vanished_client_is_counted_apart_from_a_closing_one(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("device-ws-vanish").await;
    let closed = |reason: &'static str| {
        let server = &server;
        async move {
            metric(
                server,
                &format!("muster_sockets_closed_total{{reason=\"{reason}\"}}"),
            )
            .await
        }
    };
    let mut polite = connect(&server, &token, "json").await;
    polite.close(None).await.expect("close");
    eventually("the close counted", || async {
        closed("client_closed").await == 1.0
    })
    .await;
    // Dropped with no close frame: the TCP connection just ends, as when a client is killed.
    let rude = connect(&server, &token, "json").await;
    drop(rude);
    eventually("the vanished client counted", || async {
        closed("connection_reset").await == 1.0
    })
    .await;
    assert_eq!(closed("protocol_error").await, 0.0);
    assert_eq!(closed("client_closed").await, 1.0);
}

async fn next_binary(socket: &mut Socket) -> Vec<u8> {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .expect("frame")
            .expect("open")
            .expect("valid");
        match frame {
            Message::Binary(bytes) => return bytes.to_vec(),
            Message::Text(text) => return text.as_bytes().to_vec(),
            _ => continue,
        }
    }
}

async fn protobuf_ping_pong(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("device-ws-proto").await;
    let mut socket = connect(&server, &token, "protobuf").await;
    let ping = realtime::encode_protobuf(&Envelope::new("42", Kind::Ping(Ping {})));
    socket.send(Message::binary(ping)).await.expect("send");
    let reply =
        realtime::decode_protobuf(&next_binary(&mut socket).await).expect("protobuf envelope");
    assert_eq!(reply.cid, "42");
    assert!(matches!(reply.message, Some(Kind::Pong(_))));
    // An unknown field number (99) is answered with an error, in protobuf.
    socket
        .send(Message::binary(vec![0x0a, 0x01, b'7', 0x9a, 0x06, 0x00]))
        .await
        .expect("send");
    let reply =
        realtime::decode_protobuf(&next_binary(&mut socket).await).expect("protobuf envelope");
    assert_eq!(reply.cid, "7");
    assert!(matches!(reply.message, Some(Kind::Error(ref e)) if e.code == 1));
}

async fn oversized_frame_closes_with_1009(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.socket.max_message_size_bytes = 1024;
    let server = TestServer::start(config).await;
    let (token, _) = server.device_session("device-ws-big").await;
    let mut socket = connect(&server, &token, "json").await;
    let big = format!(r#"{{"cid":"1","ping":{{}},"pad":"{}"}}"#, "x".repeat(4096));
    socket.send(Message::text(big)).await.expect("send");
    let (code, reason) = close_of(&mut socket).await;
    assert_eq!(code, CloseCode::Size, "{reason}");
    // The server is unharmed.
    let mut again = connect(&server, &token, "json").await;
    again
        .send(Message::text(r#"{"cid":"1","ping":{}}"#))
        .await
        .expect("send");
    assert_eq!(next_json(&mut again).await["cid"], "1");
}

async fn presence_follows_sockets(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("device-ws-presence").await;
    let online =
        || async { server.get_with_token("/v2/account", &token).await.1["user"]["online"] == true };
    assert!(!online().await);
    let mut first = connect(&server, &token, "json").await;
    let mut second = connect(&server, &token, "json").await;
    assert!(online().await);
    first.close(None).await.expect("close");
    eventually("a keep-alive timeout", || async {
        metric(&server, "muster_sockets_open").await == 1.0
    })
    .await;
    assert!(online().await, "still one socket open");
    second.close(None).await.expect("close");
    eventually("the user offline", || async { !online().await }).await;
}

async fn dead_peer_is_dropped_live_peer_kept(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.socket.ping_period_ms = 100;
    config.socket.pong_wait_ms = 400;
    let server = TestServer::start(config).await;
    let (token, _) = server.device_session("device-ws-alive").await;

    // A client that keeps reading answers the server's pings (tungstenite does) and stays.
    let mut live = connect(&server, &token, "json").await;
    let reader = tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(1200);
        while tokio::time::Instant::now() < deadline {
            match tokio::time::timeout(Duration::from_millis(100), live.next()).await {
                Ok(Some(Ok(Message::Close(frame)))) => panic!("live peer closed: {frame:?}"),
                Ok(None) | Ok(Some(Err(_))) => panic!("live peer dropped"),
                _ => {}
            }
        }
        live
    });
    // A client that reads nothing never answers pings and is dropped for it. (Reading now would
    // make tungstenite answer the queued pings on a closed socket, so ask the server instead.)
    let _dead = connect(&server, &token, "json").await;
    eventually("the condition", || async {
        metric(
            &server,
            "muster_sockets_closed_total{reason=\"keepalive_timeout\"}",
        )
        .await
            == 1.0
    })
    .await;
    let mut live = reader.await.expect("live peer kept");
    live.send(Message::text(r#"{"cid":"9","ping":{}}"#))
        .await
        .expect("send");
    assert_eq!(next_json(&mut live).await["cid"], "9");
}

async fn shutdown_sends_close_frames(backend: Backend) {
    let db = Database::new(backend).await;
    let mut server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("device-ws-shutdown").await;
    let mut sockets = Vec::new();
    for _ in 0..3 {
        sockets.push(connect(&server, &token, "json").await);
    }
    let stopping = tokio::spawn(async move {
        let result = server.shutdown().await;
        (server, result)
    });
    for socket in &mut sockets {
        let (code, reason) = close_of(socket).await;
        assert_eq!(code, CloseCode::Away);
        assert!(reason.contains("shutting down"), "{reason}");
    }
    let (server, result) = stopping.await.expect("join");
    result.expect("run returned cleanly");
    // Nothing accepts connections any more.
    assert!(server
        .http
        .get(server.url("/healthcheck"))
        .send()
        .await
        .is_err());
    // The account written before shutdown is there after a restart.
    let server = TestServer::start(db.config()).await;
    let (status, _) = server
        .authenticate(
            "device",
            "create=false",
            json!({"id": "device-ws-shutdown"}),
        )
        .await;
    assert_eq!(status, 200);
}

async fn socket_limit_and_rate_limit(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.socket.max_sockets = 1;
    config.limits.auth_per_ip_per_sec = 1;
    config.limits.auth_burst = 2;
    let server = TestServer::start(config).await;
    let (token, _) = server.device_session("device-ws-limit").await;
    // Many upgrades at once cannot all find room for the last place: exactly one gets it.
    let burst = (0..16).map(|_| connect_async(server.ws_url(&format!("token={token}"))));
    let mut admitted = Vec::new();
    for attempt in futures_util::future::join_all(burst).await {
        match attempt {
            Ok((socket, _)) => admitted.push(socket),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status(), 503)
            }
            Err(other) => panic!("expected 101 or 503, got {other:?}"),
        }
    }
    assert_eq!(
        admitted.len(),
        1,
        "a socket limit of 1 admitted {}",
        admitted.len()
    );
    match connect_async(server.ws_url(&format!("token={token}"))).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 503)
        }
        other => panic!("expected 503, got {:?}", other.map(|_| ())),
    }
    // Burst of 2 (one used above): the next passes, then 429 with Nakama's body.
    let (status, _) = server
        .authenticate("device", "", json!({"id": "device-ws-limit"}))
        .await;
    assert_eq!(status, 200);
    let limited = server
        .authenticate("device", "", json!({"id": "device-ws-limit"}))
        .await;
    assert!(assert_error(&limited, 429, 8).contains("Too many"));
}

async fn metrics_count_sockets(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.metrics.token = "scrape-me".into();
    let server = TestServer::start(config).await;
    let (token, _) = server.device_session("device-ws-metrics").await;
    let _a = connect(&server, &token, "json").await;
    let _b = connect(&server, &token, "json").await;
    // A socket is counted when its session registers, just after the upgrade is answered.
    support::eventually("both sockets counted", || async {
        let text = server
            .http
            .get(server.url("/metrics"))
            .bearer_auth("scrape-me")
            .send()
            .await
            .expect("send")
            .text()
            .await
            .expect("text");
        text.lines().any(|l| l == "muster_sockets_open 2")
    })
    .await;
    let refused = server
        .http
        .get(server.url("/metrics"))
        .send()
        .await
        .expect("send");
    assert_eq!(refused.status(), 401);
    let text = server
        .http
        .get(server.url("/metrics"))
        .bearer_auth("scrape-me")
        .send()
        .await
        .expect("send")
        .text()
        .await
        .expect("text");
    let value = |name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing in\n{text}"))
    };
    assert_eq!(value("muster_sockets_open"), 2.0);
    assert_eq!(value("muster_users_online"), 1.0);
    assert_eq!(value("muster_accounts_created_total"), 1.0);
    assert!(text.contains("muster_http_request_duration_seconds_bucket"));
    assert!(text.contains("muster_db_operation_duration_seconds_bucket{op=\"find_or_create\""));
    // The build and the process: its version, memory, open files and threads.
    assert!(
        text.contains(&format!(
            "muster_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    assert!(value("muster_process_resident_memory_bytes") > 1e6);
    assert!(value("muster_process_open_fds") >= 4.0);
    assert!(value("muster_process_threads") >= 2.0);
    assert!(value("muster_process_max_fds") >= value("muster_process_open_fds"));
}

/// `ban_users` with the HTTP key: the player's sockets close at once (1008 "banned"), their
/// token and refresh token are refused, they cannot authenticate; a player cannot ban anyone;
/// `unban_users` lets them back in.
async fn a_ban_ends_sockets_and_refuses_tokens(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, refresh_token) = server.device_session("device-banned-1").await;
    let (other, _) = server.device_session("device-banned-bystander").await;
    let user = support::claims(&token)["uid"]
        .as_str()
        .expect("uid")
        .to_owned();
    let mut first = connect(&server, &token, "json").await;
    let mut second = connect(&server, &token, "protobuf").await;
    let mut bystander = connect(&server, &other, "json").await;
    let rpc = |id: &str, body: Value, bearer: Option<&str>| {
        let mut request = server
            .http
            .post(server.url(&format!("/v2/rpc/{id}?unwrap")));
        request = match bearer {
            Some(token) => request.bearer_auth(token),
            None => request.basic_auth("defaulthttpkey", Some("")),
        };
        request.body(body.to_string()).send()
    };
    // A player cannot ban, not even themselves; bad ids are refused; nothing changes.
    let refused = rpc("ban_users", json!({"user_ids": [user]}), Some(&other))
        .await
        .expect("send");
    assert_eq!(refused.status(), 403);
    let bad = rpc("ban_users", json!({"user_ids": ["not-an-id"]}), None)
        .await
        .expect("send");
    assert_eq!(bad.status(), 400);
    assert_eq!(server.get_with_token("/v2/account", &token).await.0, 200);

    let banned = rpc(
        "ban_users",
        json!({"user_ids": [user, uuid::Uuid::new_v4()]}),
        None,
    )
    .await
    .expect("send");
    assert_eq!(banned.status(), 200);
    let answer: Value = banned.json().await.expect("json");
    assert_eq!(
        answer["user_ids"],
        json!([user]),
        "only accounts that exist"
    );
    for socket in [&mut first, &mut second] {
        let (code, reason) = close_of(socket).await;
        assert_eq!((code, reason.as_str()), (CloseCode::Policy, "banned"));
    }
    assert_error(&server.get_with_token("/v2/account", &token).await, 401, 16);
    let again = server
        .http
        .post(server.url("/v2/account/authenticate/device?create=true"))
        .basic_auth("defaultkey", Some(""))
        .json(&json!({"id": "device-banned-1"}))
        .send()
        .await
        .expect("send");
    assert_eq!(again.status(), 403);
    let refresh = server
        .http
        .post(server.url("/v2/account/session/refresh"))
        .basic_auth("defaultkey", Some(""))
        .json(&json!({"token": refresh_token}))
        .send()
        .await
        .expect("send");
    assert!(
        refresh.status() == 401 || refresh.status() == 403,
        "{}",
        refresh.status()
    );
    // Others are untouched.
    bystander
        .send(Message::text(json!({"cid": "1", "ping": {}}).to_string()))
        .await
        .expect("send");
    assert_eq!(next_json(&mut bystander).await["cid"], "1");
    // The ban survives a restart of the node.
    server.stop().await.expect("stop");
    let server = TestServer::start(db.config()).await;
    assert_error(&server.get_with_token("/v2/account", &token).await, 401, 16);

    let unbanned = server
        .http
        .post(server.url("/v2/rpc/unban_users?unwrap"))
        .basic_auth("defaulthttpkey", Some(""))
        .body(json!({"user_ids": [user]}).to_string())
        .send()
        .await
        .expect("send");
    assert_eq!(unbanned.status(), 200);
    let (fresh, _) = server.device_session("device-banned-1").await;
    assert_eq!(server.get_with_token("/v2/account", &fresh).await.0, 200);
}
