//! What one player, or one address, can take of a node: rooms per player and their creation
//! rate, a paged room listing, a deleted room gone before its 204, sockets per account and per
//! address, matchmaker tickets per user across sessions, and which address the per-IP limits
//! count (trusted proxies' `X-Forwarded-For`, IPv6 per /64).

use crate::support;

use muster::config::Config;
use serde_json::{json, Value};
use support::client::{b64, error_code, Client};
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
    auth: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = server
        .http
        .request(method.parse().expect("method"), server.url(path))
        .header("authorization", auth);
    if let Some(body) = body {
        request = request.json(&body);
    }
    support::status_and_json(request.send().await.expect("request")).await
}

async fn create(server: &TestServer, auth: &str) -> (u16, Value) {
    call(
        server,
        "POST",
        "/v2/rooms",
        auth,
        Some(json!({"handler": "arena", "capacity": 2})),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_player_cannot_fill_a_node_with_rooms() {
    let (server, _db) = server(|c| {
        c.rooms.admin_key = "game-server-key".into();
        c.rooms.max_rooms_per_user = 3;
        c.rooms.creates_per_user_per_minute = 5;
    })
    .await;
    let alice = Client::connect(&server, "quota-rooms-alice").await;
    let bob = Client::connect(&server, "quota-rooms-bob").await;
    let auth = format!("Bearer {}", alice.token);
    let admin = format!("Basic {}", b64(b"game-server-key:"));
    let mut mine = Vec::new();
    for _ in 0..3 {
        let (status, room) = create(&server, &auth).await;
        assert_eq!(status, 201, "{room}");
        mine.push(room["room_id"].as_str().expect("id").to_owned());
    }
    // The fourth open room: refused with the reason, nothing created.
    let (status, body) = create(&server, &auth).await;
    assert_eq!((status, body["code"].as_i64()), (429, Some(8)), "{body}");
    assert!(body["message"]
        .as_str()
        .unwrap_or("")
        .contains("rooms open"));
    // Another player, and the admin key, are not held to Alice's count.
    assert_eq!(
        create(&server, &format!("Bearer {}", bob.token)).await.0,
        201
    );
    assert_eq!(create(&server, &admin).await.0, 201);
    // A room ended gives its place back...
    let (status, _) = call(
        &server,
        "DELETE",
        &format!("/v2/rooms/{}", mine[0]),
        &auth,
        None,
    )
    .await;
    assert_eq!(status, 204);
    assert_eq!(create(&server, &auth).await.0, 201);
    // ...but the creation rate (5 a minute) holds: that was the fifth.
    let (status, _) = call(
        &server,
        "DELETE",
        &format!("/v2/rooms/{}", mine[1]),
        &auth,
        None,
    )
    .await;
    assert_eq!(status, 204);
    let (status, body) = create(&server, &auth).await;
    assert_eq!(status, 429, "{body}");
    assert!(body["message"].as_str().unwrap_or("").contains("slow down"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_room_is_gone_from_every_route_before_the_204() {
    let (server, _db) = server(|_| {}).await;
    let mut alice = Client::connect(&server, "quota-delete-alice").await;
    let auth = format!("Bearer {}", alice.token);
    for round in 0..20 {
        let (status, room) = create(&server, &auth).await;
        assert_eq!(status, 201, "{room}");
        let id = room["room_id"].as_str().expect("id").to_owned();
        let (status, _) = call(&server, "DELETE", &format!("/v2/rooms/{id}"), &auth, None).await;
        assert_eq!(status, 204);
        // At once, with no waiting: no room, no ticket, not listed, no join.
        let (status, _) = call(&server, "GET", &format!("/v2/rooms/{id}"), &auth, None).await;
        assert_eq!(status, 404, "round {round}");
        let path = format!("/v2/rooms/{id}/connection");
        assert_eq!(
            call(&server, "GET", &path, &auth, None).await.0,
            404,
            "round {round}"
        );
        let (_, list) = call(&server, "GET", "/v2/rooms", &auth, None).await;
        assert!(!list.to_string().contains(&id), "round {round}: {list}");
        let join = alice.request(json!({"match_join": {"match_id": id}})).await;
        assert_eq!(error_code(&join), 4, "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_room_listing_is_paged_and_bounded_for_players() {
    let (server, _db) = server(|c| {
        c.rooms.admin_key = "game-server-key".into();
        c.rooms.max_rooms_per_user = 0;
        c.rooms.creates_per_user_per_minute = 0;
    })
    .await;
    let alice = Client::connect(&server, "quota-list-alice").await;
    let auth = format!("Bearer {}", alice.token);
    let admin = format!("Basic {}", b64(b"game-server-key:"));
    let mut created = Vec::new();
    for _ in 0..7 {
        let (_, room) = create(&server, &auth).await;
        created.push(room["room_id"].as_str().expect("id").to_owned());
    }
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let path = format!("/v2/rooms?limit=3&cursor={cursor}");
        let (status, page) = call(&server, "GET", &path, &auth, None).await;
        assert_eq!(status, 200, "{page}");
        let rooms = page["rooms"].as_array().expect("rooms");
        assert!(rooms.len() <= 3);
        seen.extend(
            rooms
                .iter()
                .map(|r| r["room_id"].as_str().expect("id").to_owned()),
        );
        match page["cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, created, "every room once, oldest first");
    // A handler with no rooms: an empty page, at once.
    let (status, page) = call(&server, "GET", "/v2/rooms?handler=none", &auth, None).await;
    assert_eq!(
        (status, page["rooms"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    // Players page by at most 100; the admin key by up to 1000.
    assert_eq!(
        call(&server, "GET", "/v2/rooms?limit=101", &auth, None)
            .await
            .0,
        400
    );
    assert_eq!(
        call(&server, "GET", "/v2/rooms?limit=1000", &admin, None)
            .await
            .0,
        200
    );
    assert_eq!(
        call(&server, "GET", "/v2/rooms?limit=1001", &admin, None)
            .await
            .0,
        400
    );
    // A cursor that is not the server's is refused.
    let (status, body) = call(&server, "GET", "/v2/rooms?cursor=%21%21", &auth, None).await;
    assert_eq!(status, 400, "{body}");
}

async fn upgrade(server: &TestServer, token: &str) -> u16 {
    // Not a WebSocket upgrade: an admitted request gets 400 from the upgrade itself, a refused
    // one the refusal (the socket limits are checked first).
    let request = server.http.get(server.url(&format!("/ws?token={token}")));
    request.send().await.expect("request").status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_are_bounded_per_account_and_per_address() {
    let (server, _db) = server(|c| {
        c.socket.max_sockets_per_user = 2;
        c.limits.max_sockets_per_ip = 3;
    })
    .await;
    let a1 = Client::connect(&server, "quota-sockets-a").await;
    let _a2 = Client::with_token(&server.addr.to_string(), &a1.token).await;
    // A third socket of the same account: 429, with the reason.
    let response = server
        .http
        .get(server.url(&format!("/ws?token={}", a1.token)))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 429);
    let body: Value = response.json().await.expect("JSON");
    assert!(
        body["message"].as_str().unwrap_or("").contains("account"),
        "{body}"
    );
    // Another account from the same address: the third socket of the address is the last.
    let b = Client::connect(&server, "quota-sockets-b").await;
    let (c, _) = server.device_session("quota-sockets-c").await;
    assert_eq!(upgrade(&server, &c).await, 429);
    // A socket that closes gives its places back (once the server has seen it close).
    drop(b);
    support::eventually("the closed socket's place given back", || async {
        upgrade(&server, &c).await == 400
    })
    .await;
}

/// `POST /v2/account/authenticate/device` as the client behind `forwarded` (if any).
async fn authenticate(server: &TestServer, device: &str, forwarded: Option<&str>) -> u16 {
    let mut request = server
        .http
        .post(server.url("/v2/account/authenticate/device?create=true"))
        .basic_auth("defaultkey", Some(""))
        .json(&json!({ "id": device }));
    if let Some(forwarded) = forwarded {
        request = request.header("x-forwarded-for", forwarded);
    }
    request.send().await.expect("request").status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_ip_limits_count_the_forwarded_client_only_behind_a_trusted_proxy() {
    // One authentication per address per second (no burst): each call shows whose bucket it
    // was counted in.
    let tune = |trusted: bool| {
        move |c: &mut Config| {
            c.limits.auth_per_ip_per_sec = 1;
            c.limits.auth_burst = 1;
            if trusted {
                c.limits.trusted_proxies = vec!["127.0.0.0/8".into()];
            }
        }
    };
    let (proxied, _db) = server(tune(true)).await;
    // Behind the trusted proxy (127.0.0.1): distinct clients have buckets of their own...
    let forwarded = ["198.51.100.1, 203.0.113.5", "198.51.100.1, 203.0.113.6"];
    assert_eq!(
        authenticate(&proxied, "forwarded-device-1", Some(forwarded[0])).await,
        200
    );
    assert_eq!(
        authenticate(&proxied, "forwarded-device-2", Some(forwarded[1])).await,
        200
    );
    // ...the same client is held to its own; a forged hop left of it changes nothing.
    let forged = "10.9.9.9, 203.0.113.5";
    assert_eq!(
        authenticate(&proxied, "forwarded-device-3", Some(forged)).await,
        429
    );
    // IPv6 clients count per /64.
    assert_eq!(
        authenticate(&proxied, "v6-device-1", Some("2001:db8:1:2::1")).await,
        200
    );
    assert_eq!(
        authenticate(&proxied, "v6-device-2", Some("2001:db8:1:2:ffff::9")).await,
        429
    );
    assert_eq!(
        authenticate(&proxied, "v6-device-3", Some("2001:db8:1:3::1")).await,
        200
    );
    proxied.stop().await.expect("stop");

    // No trusted proxy: the header is the client's own word and is ignored.
    let (server, _db) = server(tune(false)).await;
    assert_eq!(
        authenticate(&server, "plain-device-1", Some(forwarded[0])).await,
        200
    );
    assert_eq!(
        authenticate(&server, "plain-device-2", Some(forwarded[1])).await,
        429
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matchmaker_tickets_are_bounded_per_user_across_their_sockets() {
    let (server, _db) = server(|c| {
        c.matchmaker.max_tickets_per_session = 2;
        c.matchmaker.max_tickets_per_user = 3;
    })
    .await;
    let mut first = Client::connect(&server, "quota-tickets-user").await;
    let mut second = Client::with_token(&server.addr.to_string(), &first.token).await;
    let add = json!({"matchmaker_add": {"min_count": 2, "max_count": 2, "query": "+properties.mode:solo"}});
    for socket in [&mut first, &mut second] {
        let reply = socket.request(add.clone()).await;
        assert!(reply.get("matchmaker_ticket").is_some(), "{reply}");
    }
    let third = first.request(add.clone()).await;
    assert!(third.get("matchmaker_ticket").is_some(), "{third}");
    // The user's fourth ticket, from a socket that holds only one: refused.
    let fourth = second.request(add.clone()).await;
    assert_eq!(error_code(&fourth), 3, "{fourth}");
    assert!(
        fourth["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("per user"),
        "{fourth}"
    );
    // A socket's end takes its tickets away, and gives the user room again (retried until
    // the server has seen the socket close; bounded).
    drop(first);
    let mut wait = support::Wait::new("the closed socket's tickets removed", support::EVENTUALLY);
    while second
        .request(add.clone())
        .await
        .get("matchmaker_ticket")
        .is_none()
    {
        wait.tick().await;
    }
}
