//! Accounts and sessions over the REST API, on SQLite and PostgreSQL.

use crate::support;

use serde_json::json;
use support::{assert_error, claims, status_and_json, Backend, Database, TestServer};

on_both_backends!(
    device_authentication,
    custom_authentication,
    email_authentication,
    server_key_is_required,
    refresh_rotates_tokens,
    reusable_refresh_tokens_work_until_logout,
    logout_revokes_and_survives_restart,
    account_read_and_update,
    bad_requests_get_clear_errors,
    expired_token_is_refused,
    concurrent_creation_of_one_device_makes_one_account,
    a_refresh_token_works_once_under_concurrency,
    revocations_reach_other_nodes_and_expire,
    server_code_sets_metadata_players_cannot,
    a_deleted_account_stays_refused_after_a_restart,
    concurrent_unlinks_never_remove_the_last_credential,
);

async fn device_authentication(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;

    let (status, first) = server
        .authenticate(
            "device",
            "create=true&username=alice",
            json!({"id": "device-alice-1", "vars": {"tier": "gold"}}),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["created"], true);
    let token = claims(first["token"].as_str().expect("token"));
    assert_eq!(token["usn"], "alice");
    assert_eq!(token["vrs"]["tier"], "gold");
    assert!(token["exp"].as_i64().expect("exp") > token["iat"].as_i64().expect("iat"));
    let refresh = claims(first["refresh_token"].as_str().expect("refresh"));
    assert!(
        refresh["exp"].as_i64() > token["exp"].as_i64(),
        "refresh outlives session"
    );

    // Second time: same account, not created, username param ignored.
    let (status, second) = server
        .authenticate(
            "device",
            "create=true&username=other",
            json!({"id": "device-alice-1"}),
        )
        .await;
    assert_eq!(status, 200);
    assert!(
        second.get("created").is_none(),
        "created omitted when false: {second}"
    );
    assert_eq!(
        claims(second["token"].as_str().expect("token"))["uid"],
        token["uid"]
    );

    // create=false finds an existing device and refuses an unknown one.
    let (status, _) = server
        .authenticate("device", "create=false", json!({"id": "device-alice-1"}))
        .await;
    assert_eq!(status, 200);
    let missing = server
        .authenticate("device", "create=false", json!({"id": "device-nobody-1"}))
        .await;
    assert_error(&missing, 404, 5);

    // A generated username when none is given.
    let (_, generated) = server
        .authenticate("device", "", json!({"id": "device-bob-0001"}))
        .await;
    let name = claims(generated["token"].as_str().expect("token"))["usn"]
        .as_str()
        .expect("usn")
        .to_owned();
    assert_eq!(name.len(), 10);

    // A chosen username already taken: 409 and no account made for the device.
    let taken = server
        .authenticate("device", "username=alice", json!({"id": "device-carol-1"}))
        .await;
    assert_error(&taken, 409, 6);
    let (status, _) = server
        .authenticate("device", "create=false", json!({"id": "device-carol-1"}))
        .await;
    assert_eq!(status, 404);

    for bad in [
        json!({}),
        json!({"id": "short"}),
        json!({"id": "x".repeat(129)}),
        json!({"id": "has spaces in it"}),
    ] {
        let result = server.authenticate("device", "", bad.clone()).await;
        let message = assert_error(&result, 400, 3);
        assert!(message.contains("Device ID"), "{bad}: {message}");
    }
    let bad_create = server
        .authenticate("device", "create=maybe", json!({"id": "device-alice-1"}))
        .await;
    assert_error(&bad_create, 400, 3);
    server.stop().await.expect("clean stop");
}

async fn custom_authentication(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (status, first) = server
        .authenticate("custom", "", json!({"id": "steam-123"}))
        .await;
    assert_eq!((status, first["created"].clone()), (200, json!(true)));
    let (status, second) = server
        .authenticate("custom", "", json!({"id": "steam-123"}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        claims(first["token"].as_str().expect("t"))["uid"],
        claims(second["token"].as_str().expect("t"))["uid"]
    );
    assert_error(
        &server
            .authenticate("custom", "", json!({"id": "abc"}))
            .await,
        400,
        3,
    );
    assert_error(
        &server
            .authenticate("custom", "create=false", json!({"id": "steam-999"}))
            .await,
        404,
        5,
    );
    let token = first["token"].as_str().expect("token");
    let (_, account) = server.get_with_token("/v2/account", token).await;
    assert_eq!(account["custom_id"], "steam-123");
}

async fn email_authentication(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let creds = json!({"email": "Player.One@Example.com", "password": "correct horse"});
    let (status, first) = server
        .authenticate("email", "username=player1", creds.clone())
        .await;
    assert_eq!(
        (status, first["created"].clone()),
        (200, json!(true)),
        "{first}"
    );
    // Emails are case-insensitive.
    let (status, again) = server
        .authenticate(
            "email",
            "create=false",
            json!({"email": "player.one@example.com", "password": "correct horse"}),
        )
        .await;
    assert_eq!(status, 200, "{again}");

    // Wrong password and unknown email give the same answer: no account enumeration.
    let wrong = server
        .authenticate(
            "email",
            "create=false",
            json!({"email": "player.one@example.com", "password": "wrong horse"}),
        )
        .await;
    let unknown = server
        .authenticate(
            "email",
            "create=false",
            json!({"email": "nobody.here@example.com", "password": "wrong horse"}),
        )
        .await;
    let wrong_message = assert_error(&wrong, 401, 16);
    assert_eq!(wrong_message, assert_error(&unknown, 401, 16));
    // create=true with the wrong password does not take over the account either.
    let takeover = server
        .authenticate(
            "email",
            "",
            json!({"email": "player.one@example.com", "password": "other pass"}),
        )
        .await;
    assert_error(&takeover, 401, 16);

    assert_error(
        &server
            .authenticate("email", "", json!({"email": "a@b", "password": "12345678"}))
            .await,
        400,
        3,
    );
    let short = server
        .authenticate(
            "email",
            "",
            json!({"email": "someone@example.com", "password": "1234567"}),
        )
        .await;
    assert!(assert_error(&short, 400, 3).contains("at least 8"));

    let token = first["token"].as_str().expect("token");
    let (_, account) = server.get_with_token("/v2/account", token).await;
    assert_eq!(account["email"], "player.one@example.com");
    assert!(
        account.to_string().find("argon2").is_none(),
        "the hash never leaves the server"
    );
}

async fn server_key_is_required(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.server_key = "s3cret-key".into();
    let server = TestServer::start(config).await;
    let url = server.url("/v2/account/authenticate/device");
    let body = json!({"id": "device-key-test"});
    let none = status_and_json(
        server
            .http
            .post(&url)
            .json(&body)
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert!(assert_error(&none, 401, 16).contains("required"));
    let wrong = status_and_json(
        server
            .http
            .post(&url)
            .basic_auth("defaultkey", Some(""))
            .json(&body)
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert!(assert_error(&wrong, 401, 16).contains("invalid"));
    let right = server
        .http
        .post(&url)
        .basic_auth("s3cret-key", Some(""))
        .json(&body)
        .send()
        .await
        .expect("send");
    assert_eq!(right.status(), 200);
}

async fn refresh(
    server: &TestServer,
    refresh_token: &str,
    vars: serde_json::Value,
) -> (u16, serde_json::Value) {
    let response = server
        .http
        .post(server.url("/v2/account/session/refresh"))
        .basic_auth("defaultkey", Some(""))
        .json(&json!({"token": refresh_token, "vars": vars}))
        .send()
        .await
        .expect("send");
    status_and_json(response).await
}

/// Logs the session of `token` out, naming both tokens; the answer's status.
async fn logout(server: &TestServer, token: &str, refresh_token: &str) -> u16 {
    server
        .http
        .post(server.url("/v2/session/logout"))
        .bearer_auth(token)
        .json(&json!({"token": token, "refresh_token": refresh_token}))
        .send()
        .await
        .expect("send")
        .status()
        .as_u16()
}

async fn refresh_rotates_tokens(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, refresh_token) = server.device_session("device-refresh-1").await;

    let (status, renewed) = refresh(&server, &refresh_token, json!({"k": "v"})).await;
    assert_eq!(status, 200, "{renewed}");
    let new_token = renewed["token"].as_str().expect("token");
    assert_ne!(new_token, token);
    assert_eq!(claims(new_token)["uid"], claims(&token)["uid"]);
    assert_eq!(claims(new_token)["vrs"]["k"], "v");
    assert_eq!(server.get_with_token("/v2/account", new_token).await.0, 200);

    // The used refresh token works no more; the session token it replaced works on until it
    // expires (as in Nakama: a refresh while requests are in flight breaks none of them).
    let reused = refresh(&server, &refresh_token, json!({})).await;
    assert!(assert_error(&reused, 401, 16).contains("revoked"));
    assert_eq!(server.get_with_token("/v2/account", &token).await.0, 200);
    // The new refresh token works (once).
    let next = renewed["refresh_token"].as_str().expect("refresh token");
    assert_eq!(refresh(&server, next, json!({})).await.0, 200);
    assert_error(&refresh(&server, next, json!({})).await, 401, 16);

    // A session token is not a refresh token (different signing key).
    let confused = refresh(&server, new_token, json!({})).await;
    assert_error(&confused, 401, 16);
    assert_error(&refresh(&server, "", json!({})).await, 400, 3);
    assert_error(&refresh(&server, "not.a.jwt", json!({})).await, 401, 16);
}

/// `session.refresh_token_single_use = false`: a refresh token works until it expires, as in
/// Nakama, and a logout of its pair still ends it.
async fn reusable_refresh_tokens_work_until_logout(backend: Backend) {
    let db = Database::new(backend).await;
    let reusable = || {
        let mut config = db.config();
        config.session.refresh_token_single_use = false;
        config
    };
    let server = TestServer::start(reusable()).await;
    let (token, refresh_token) = server.device_session("device-reuse-1").await;
    for _ in 0..3 {
        let (status, renewed) = refresh(&server, &refresh_token, json!({})).await;
        assert_eq!(status, 200, "{renewed}");
    }
    assert_eq!(server.get_with_token("/v2/account", &token).await.0, 200);
    assert_eq!(logout(&server, &token, &refresh_token).await, 200);
    assert_error(&refresh(&server, &refresh_token, json!({})).await, 401, 16);
    server.stop().await.expect("stop");
    // After a restart too (the decision is the store's, not a node's memory).
    let server = TestServer::start(reusable()).await;
    assert_error(&refresh(&server, &refresh_token, json!({})).await, 401, 16);
}

async fn logout_revokes_and_survives_restart(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, refresh_token) = server.device_session("device-logout-1").await;
    let (other_token, _) = server.device_session("device-logout-2").await;
    assert_eq!(logout(&server, &token, &refresh_token).await, 200);
    let refused = server.get_with_token("/v2/account", &token).await;
    assert!(assert_error(&refused, 401, 16).contains("revoked"));
    assert_error(&refresh(&server, &refresh_token, json!({})).await, 401, 16);
    assert_eq!(
        server.get_with_token("/v2/account", &other_token).await.0,
        200,
        "others unaffected"
    );
    server.stop().await.expect("stop");

    // Same database, new process state: the revocation is remembered, the other token still works.
    let server = TestServer::start(db.config()).await;
    assert_error(&server.get_with_token("/v2/account", &token).await, 401, 16);
    assert_eq!(
        server.get_with_token("/v2/account", &other_token).await.0,
        200
    );
    let unauthenticated = status_and_json(
        server
            .http
            .post(server.url("/v2/session/logout"))
            .json(&json!({}))
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_error(&unauthenticated, 401, 16);
}

async fn account_read_and_update(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, _) = server.device_session("device-profile-1").await;
    let (other, _) = server.device_session("device-profile-2").await;
    let other_name = claims(&other)["usn"].as_str().expect("usn").to_owned();

    let (status, account) = server.get_with_token("/v2/account", &token).await;
    assert_eq!(status, 200);
    assert_eq!(account["devices"][0]["id"], "device-profile-1");
    assert_eq!(account["user"]["id"], claims(&token)["uid"]);
    // The starting wallet (economy.starting_wallet, empty by default as Nakama's), as Nakama shows
    // a wallet: JSON in a string.
    assert_eq!(account["wallet"], "{}");
    assert!(account["user"]["create_time"]
        .as_str()
        .expect("time")
        .ends_with('Z'));

    let put = |body: serde_json::Value| {
        let request = server
            .http
            .put(server.url("/v2/account"))
            .bearer_auth(&token)
            .json(&body);
        async move { status_and_json(request.send().await.expect("send")).await }
    };
    let update = json!({
        "username": "renamed-player", "display_name": "Renamed", "avatar_url": "https://example.com/a.png",
        "lang_tag": "fr", "location": "Lyon", "timezone": "Europe/Paris"
    });
    assert_eq!(put(update.clone()).await.0, 200);
    let (_, account) = server.get_with_token("/v2/account", &token).await;
    for key in [
        "username",
        "display_name",
        "avatar_url",
        "lang_tag",
        "location",
        "timezone",
    ] {
        assert_eq!(account["user"][key], update[key], "{key}");
    }
    // A player cannot write their own metadata (Nakama's request has no such field; an unknown
    // field is ignored, as Nakama's gateway does): roles and entitlements live there.
    let metadata_before = account["user"]["metadata"].clone();
    let sneaky = json!({"metadata": "{\"role\":\"admin\"}", "location": "Paris"});
    assert_eq!(put(sneaky).await.0, 200);
    let (_, account) = server.get_with_token("/v2/account", &token).await;
    assert_eq!(account["user"]["metadata"], metadata_before);
    assert_eq!(account["user"]["location"], "Paris");
    assert_eq!(put(json!({"location": "Lyon"})).await.0, 200);
    // Partial update leaves the rest alone.
    assert_eq!(put(json!({"display_name": "Again"})).await.0, 200);
    let (_, account) = server.get_with_token("/v2/account", &token).await;
    assert_eq!(account["user"]["display_name"], "Again");
    assert_eq!(account["user"]["location"], "Lyon");

    assert_error(&put(json!({"username": other_name})).await, 409, 6);
    assert_error(&put(json!({"username": "has space"})).await, 400, 3);
    assert_error(&put(json!({"lang_tag": "x".repeat(40)})).await, 400, 3);
    let (_, account) = server.get_with_token("/v2/account", &token).await;
    assert_eq!(
        account["user"]["username"], "renamed-player",
        "failed updates changed nothing"
    );

    assert_error(
        &server.get_with_token("/v2/account", "garbage").await,
        401,
        16,
    );
    let no_auth = status_and_json(
        server
            .http
            .get(server.url("/v2/account"))
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert!(assert_error(&no_auth, 401, 16).contains("required"));
}

async fn bad_requests_get_clear_errors(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.limits.max_request_size_bytes = 1024;
    let server = TestServer::start(config).await;
    let post = |body: String| {
        server
            .http
            .post(server.url("/v2/account/authenticate/device"))
            .basic_auth("defaultkey", Some(""))
            .body(body)
            .send()
    };
    let malformed = status_and_json(post("{\"id\":".into()).await.expect("send")).await;
    assert!(assert_error(&malformed, 400, 3).contains("Malformed JSON"));
    let wrong_type = status_and_json(post("{\"id\": 5}".into()).await.expect("send")).await;
    assert_error(&wrong_type, 400, 3);
    // On a client of its own: the server may close that connection after its 413, and the
    // shared client must not pick it up again.
    let huge = status_and_json(
        reqwest::Client::new()
            .post(server.url("/v2/account/authenticate/device"))
            .basic_auth("defaultkey", Some(""))
            .body(format!("{{\"id\":\"{}\"}}", "x".repeat(4096)))
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_error(&huge, 413, 8);
    let unknown = status_and_json(
        server
            .http
            .get(server.url("/v2/nothing"))
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_error(&unknown, 404, 5);
    let wrong_method = server
        .http
        .patch(server.url("/v2/account"))
        .send()
        .await
        .expect("send");
    assert_eq!(wrong_method.status(), 405);
}

async fn expired_token_is_refused(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    config.session.token_expiry_sec = 1;
    let server = TestServer::start(config).await;
    let (token, refresh_token) = server.device_session("device-expiry-1").await;
    assert_eq!(server.get_with_token("/v2/account", &token).await.0, 200);
    // Two seconds later by the server's clock, without waiting for them.
    server.clock.advance(std::time::Duration::from_secs(2));
    let expired = server.get_with_token("/v2/account", &token).await;
    assert!(assert_error(&expired, 401, 16).contains("expired"));
    let ws = server
        .http
        .get(server.url(&format!("/ws?token={token}")))
        .send()
        .await
        .expect("send");
    assert_eq!(ws.status(), 401);
    // The refresh token lives longer and still works.
    assert_eq!(refresh(&server, &refresh_token, json!({})).await.0, 200);
}

async fn concurrent_creation_of_one_device_makes_one_account(backend: Backend) {
    let db = Database::new(backend).await;
    let server = std::sync::Arc::new(TestServer::start(db.config()).await);
    let calls = (0..16).map(|_| {
        let server = server.clone();
        tokio::spawn(async move {
            server
                .authenticate("device", "", json!({"id": "device-raced-1"}))
                .await
        })
    });
    let mut users = std::collections::HashSet::new();
    let mut created = 0;
    for call in calls {
        let (status, body) = call.await.expect("task");
        assert_eq!(status, 200, "{body}");
        users.insert(claims(body["token"].as_str().expect("token"))["uid"].clone());
        created += usize::from(body["created"] == true);
    }
    assert_eq!(users.len(), 1, "one account for one device");
    assert_eq!(created, 1, "exactly one call created it");
}

/// Nakama decodes JSON with protojson, which takes lowerCamelCase field names as well as the
/// proto names; a body written either way changes the account the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn camel_case_and_snake_case_bodies_give_the_same_account() {
    let db = Database::new(Backend::Sqlite).await;
    let server = TestServer::start(db.config()).await;
    let mut seen = Vec::new();
    for (device, body) in [
        (
            "device-snake-case",
            json!({"display_name": "Ann", "avatar_url": "https://a/b.png", "lang_tag": "fi"}),
        ),
        (
            "device-camel-case",
            json!({"displayName": "Ann", "avatarUrl": "https://a/b.png", "langTag": "fi"}),
        ),
    ] {
        let (token, _) = server.device_session(device).await;
        let response = server
            .http
            .put(server.url("/v2/account"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .expect("update");
        assert_eq!(response.status(), 200);
        let (status, account) = server.get_with_token("/v2/account", &token).await;
        assert_eq!(status, 200, "{account}");
        let user = &account["user"];
        seen.push((
            user["display_name"].clone(),
            user["avatar_url"].clone(),
            user["lang_tag"].clone(),
        ));
    }
    assert_eq!(
        seen[0],
        (json!("Ann"), json!("https://a/b.png"), json!("fi"))
    );
    assert_eq!(seen[0], seen[1]);
}

async fn a_refresh_token_works_once_under_concurrency(backend: Backend) {
    let db = Database::new(backend).await;
    let server = std::sync::Arc::new(TestServer::start(db.config()).await);
    for round in 0..3 {
        let (_, refresh_token) = server
            .device_session(&format!("device-refresh-race-{round}"))
            .await;
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (server, refresh_token) = (server.clone(), refresh_token.clone());
                tokio::spawn(async move { refresh(&server, &refresh_token, json!({})).await })
            })
            .collect();
        let mut renewed = Vec::new();
        for task in tasks {
            let (status, body) = task.await.expect("task");
            match status {
                200 => renewed.push(body),
                _ => assert!(assert_error(&(status, body), 401, 16).contains("revoked")),
            }
        }
        assert_eq!(
            renewed.len(),
            1,
            "round {round}: {} refreshes succeeded",
            renewed.len()
        );
        // The one pair it gave works.
        let token = renewed[0]["token"].as_str().expect("token");
        assert_eq!(server.get_with_token("/v2/account", token).await.0, 200);
    }
}

/// Two token services on one database stand for two nodes whose bus message was lost: the
/// second learns of the first's revocations by reading what was stored since its last look,
/// forgets them from memory once their session token is dead (the refresh token stays refused,
/// by the store), and expired rows are pruned from the store.
async fn revocations_reach_other_nodes_and_expire(backend: Backend) {
    use muster::accounts::tokens::TokenService;
    use muster::base::clock::Clock;
    use std::time::Duration;

    let db = Database::new(backend).await;
    let config = db.config();
    let metrics = std::sync::Arc::new(muster::base::metrics::Metrics::new());
    let stores = muster::services::Stores::open(&config, metrics)
        .await
        .expect("store");
    let clock = Clock::manual();
    let node = || async {
        TokenService::new(
            &config.session,
            stores.secrets.as_ref(),
            stores.tokens.clone(),
            clock.clone(),
        )
        .await
        .expect("token service")
    };
    let (a, b) = (node().await, node().await);
    let user = uuid::Uuid::new_v4();
    let pair = a.issue(user, "alice", Default::default());
    let session = b.verify_session(&pair.token).expect("valid on both nodes");
    let refresh_claims = b.verify_refresh(&pair.refresh_token).expect("valid");

    a.revoke(&[(session.tid, session.iat)])
        .await
        .expect("revoke");
    assert!(
        a.verify_session(&pair.token).is_err(),
        "refused where revoked"
    );
    assert!(
        b.verify_session(&pair.token).is_ok(),
        "b has not looked yet"
    );
    b.reload_revocations().await.expect("reload");
    assert!(
        b.verify_session(&pair.token).is_err(),
        "b read it from the store"
    );
    assert!(!b.consume_refresh(&refresh_claims).await.expect("consume"));

    // Past the session token's life the revocation leaves memory; the refresh token is still
    // refused, by the store.
    // (The store's clock does not move with this test's: past the reload's overlap too.)
    let overlap = muster::accounts::tokens::RELOAD_OVERLAP_MS as u64 / 1000;
    clock.advance(Duration::from_secs(
        config.session.token_expiry_sec + overlap + 1,
    ));
    b.reload_revocations().await.expect("reload");
    assert_eq!(b.revocations_in_memory(), 0);
    assert!(!b.consume_refresh(&refresh_claims).await.expect("consume"));
    let (stored, _) = stores
        .tokens
        .revocations_since(i64::MIN, i64::MIN)
        .await
        .expect("read");
    // The pair's id (its session token) and its refresh id (its refresh token).
    assert_eq!(stored.len(), 2);
    assert!(stored.iter().any(|(r, _)| r.token_id == session.tid));
    // Past the refresh token's life the row is pruned.
    clock.advance(Duration::from_secs(config.session.refresh_token_expiry_sec));
    b.reload_revocations().await.expect("reload");
    let (stored, _) = stores
        .tokens
        .revocations_since(i64::MIN, i64::MIN)
        .await
        .expect("read");
    assert!(stored.is_empty(), "{stored:?}");
}

/// Metadata is the server's: a player's `PUT /v2/account` cannot write it (see
/// `account_read_and_update`), server code can, through `Accounts::set_metadata`.
async fn server_code_sets_metadata_players_cannot(backend: Backend) {
    use muster::accounts::tokens::TokenService;
    use muster::accounts::Accounts;

    let db = Database::new(backend).await;
    let config = db.config();
    let server = TestServer::start(config.clone()).await;
    let (token, _) = server.device_session("device-metadata-1").await;
    let user: uuid::Uuid = claims(&token)["uid"]
        .as_str()
        .expect("uid")
        .parse()
        .expect("uuid");
    // Server code on the same database (as a game's own Rust does, beside the server).
    let metrics = std::sync::Arc::new(muster::base::metrics::Metrics::new());
    let stores = muster::services::Stores::open(&config, metrics.clone())
        .await
        .expect("store");
    let tokens = TokenService::new(
        &config.session,
        stores.secrets.as_ref(),
        stores.tokens.clone(),
        muster::base::clock::Clock::system(),
    )
    .await
    .expect("tokens");
    let accounts = Accounts::new(
        stores.accounts.clone(),
        std::sync::Arc::new(tokens),
        muster::accounts::password::Hasher::new().expect("hasher"),
        metrics,
    );
    accounts
        .set_metadata(user, r#"{"role":"moderator"}"#)
        .await
        .expect("set");
    let (_, account) = server.get_with_token("/v2/account", &token).await;
    assert_eq!(account["user"]["metadata"], r#"{"role":"moderator"}"#);
    // The player's attempt to change it is ignored.
    let response = server
        .http
        .put(server.url("/v2/account"))
        .bearer_auth(&token)
        .json(&json!({"metadata": "{\"role\":\"admin\"}"}))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    let (_, account) = server.get_with_token("/v2/account", &token).await;
    assert_eq!(account["user"]["metadata"], r#"{"role":"moderator"}"#);
    // Server code is held to a JSON object.
    assert!(accounts.set_metadata(user, "[1]").await.is_err());
}

/// Every answer carries the request's id: the caller's `x-request-id` when it sent a usable one,
/// else a new one (the same id is in the request's log line at `debug`).
#[tokio::test]
async fn answers_name_their_request() {
    let db = Database::new(Backend::Sqlite).await;
    let server = TestServer::start(db.config()).await;
    let id_of = |response: &reqwest::Response| {
        response
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let given = server
        .http
        .get(server.url("/healthcheck"))
        .header("x-request-id", "lb-7f3a-0001")
        .send()
        .await
        .expect("send");
    assert_eq!(id_of(&given).as_deref(), Some("lb-7f3a-0001"));
    let (a, b) = (
        server
            .http
            .get(server.url("/healthcheck"))
            .send()
            .await
            .expect("send"),
        server
            .http
            .get(server.url("/v2/nope"))
            .send()
            .await
            .expect("send"),
    );
    let (a, b) = (
        id_of(&a).expect("an id"),
        id_of(&b).expect("an id on a 404 too"),
    );
    assert_eq!(a.len(), 16);
    assert_ne!(a, b);
    // One too long (or not printable) is replaced, not echoed.
    let long = server
        .http
        .get(server.url("/healthcheck"))
        .header("x-request-id", "x".repeat(65))
        .send()
        .await
        .expect("send");
    assert_eq!(id_of(&long).map(|id| id.len()), Some(16));
}

/// `POST path` with a session token and a JSON body.
async fn post_with_token(
    server: &TestServer,
    path: &str,
    token: &str,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    status_and_json(
        server
            .http
            .post(server.url(path))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("send"),
    )
    .await
}

async fn a_deleted_account_stays_refused_after_a_restart(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    let (token, refresh_token) = server.device_session("device-deleted-1").await;
    let (other, _) = server.device_session("device-deleted-2").await;
    let deleted = status_and_json(
        server
            .http
            .delete(server.url("/v2/account"))
            .bearer_auth(&token)
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(deleted.0, 200, "{deleted:?}");
    assert_error(&server.get_with_token("/v2/account", &token).await, 401, 16);
    server.stop().await.expect("stop");

    // A new process reads the deletion back: the token and the refresh token stay refused.
    let server = TestServer::start(db.config()).await;
    assert_error(&server.get_with_token("/v2/account", &token).await, 401, 16);
    assert_error(&refresh(&server, &refresh_token, json!({})).await, 401, 16);
    assert_eq!(server.get_with_token("/v2/account", &other).await.0, 200);
    // The device is free: authenticating it creates another account.
    let (status, again) = server
        .authenticate("device", "create=true", json!({"id": "device-deleted-1"}))
        .await;
    assert_eq!((status, &again["created"]), (200, &json!(true)), "{again}");
}

async fn concurrent_unlinks_never_remove_the_last_credential(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(db.config()).await;
    for round in 0..5 {
        let device = format!("device-unlink-race-{round}");
        let (token, _) = server.device_session(&device).await;
        let custom = format!("custom-unlink-race-{round}");
        let linked = post_with_token(
            &server,
            "/v2/account/link/custom",
            &token,
            json!({"id": custom}),
        )
        .await;
        assert_eq!(linked.0, 200, "{linked:?}");
        // Both credentials at once: exactly one unlink may win.
        let (a, b) = tokio::join!(
            post_with_token(
                &server,
                "/v2/account/unlink/device",
                &token,
                json!({"id": device})
            ),
            post_with_token(
                &server,
                "/v2/account/unlink/custom",
                &token,
                json!({"id": custom})
            ),
        );
        let mut statuses = [a.0, b.0];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 403], "round {round}: {a:?} {b:?}");
        let (_, account) = server.get_with_token("/v2/account", &token).await;
        let devices = account["devices"].as_array().map_or(0, Vec::len);
        let customs = usize::from(account.get("custom_id").is_some());
        assert_eq!(devices + customs, 1, "one credential left: {account}");
    }
}
