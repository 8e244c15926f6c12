//! The console's API on SQLite and PostgreSQL: logging in (slow hashes, limits, expiry), every
//! route refusing without a session, a change refused without the CSRF token or with a role
//! too low, console users managed by an admin, and every change in the audit log. The pages
//! themselves are driven in a real browser (clients/browser/test/console.test.mjs).

use crate::support;

use std::time::Duration;

use reqwest::{header, Method, StatusCode};
use serde_json::{json, Value};
use support::{Backend, Database, TestServer};

on_both_backends!(
    sessions_roles_csrf_and_the_audit_log,
    login_attempts_are_limited_and_sessions_expire,
    a_console_user_keeps_only_their_newest_sessions,
    players_found_and_changed_storage_edited_over_its_version,
    boards_matches_cluster_and_the_configuration,
    a_match_inspected_and_kicked_parties_a_players_data_and_the_autoscaler
);

const ADMIN_PASSWORD: &str = "admin-password-1";

async fn console_server(backend: Backend) -> (Database, TestServer) {
    console_server_with(backend, |_| {}).await
}

async fn console_server_with(
    backend: Backend,
    change: impl FnOnce(&mut muster::config::Config),
) -> (Database, TestServer) {
    let db = Database::new(backend).await;
    let mut config = db.config();
    change(&mut config);
    config.console.admin_password = ADMIN_PASSWORD.into();
    config.console.session_expiry_sec = 3600;
    let server = TestServer::start(config).await;
    (db, server)
}

/// A logged-in console user: the cookie and the CSRF token.
struct Login {
    cookie: String,
    csrf: String,
    role: String,
}

async fn login(server: &TestServer, username: &str, password: &str) -> Result<Login, StatusCode> {
    let response = server
        .http
        .post(server.console_url("/api/login"))
        .json(&json!({"username": username, "password": password}))
        .send()
        .await
        .expect("login request");
    if !response.status().is_success() {
        return Err(response.status());
    }
    let set_cookie = response
        .headers()
        .get(header::SET_COOKIE)
        .expect("a session cookie")
        .to_str()
        .expect("a well-formed answer")
        .to_owned();
    assert!(set_cookie.contains("HttpOnly"), "{set_cookie}");
    assert!(set_cookie.contains("SameSite=Strict"), "{set_cookie}");
    let cookie = set_cookie
        .split(';')
        .next()
        .expect("a well-formed answer")
        .to_owned();
    let body: Value = response.json().await.expect("a well-formed answer");
    Ok(Login {
        cookie,
        csrf: body["csrf"]
            .as_str()
            .expect("a well-formed answer")
            .to_owned(),
        role: body["role"]
            .as_str()
            .expect("a well-formed answer")
            .to_owned(),
    })
}

impl Login {
    /// A read as this user.
    async fn get(&self, server: &TestServer, path: &str) -> (StatusCode, Value) {
        call(server, Some(self), false, Method::GET, path, None).await
    }

    /// A change as this user, with the CSRF token.
    async fn send(
        &self,
        server: &TestServer,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        call(server, Some(self), true, method, path, body).await
    }

    /// A change as this user without the CSRF token (which the console refuses).
    async fn post(&self, server: &TestServer, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(server, Method::POST, path, Some(body)).await
    }

    async fn send_without_csrf(
        &self,
        server: &TestServer,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        call(server, Some(self), false, method, path, body).await
    }
}

/// A console call as `who` (none: no cookie), with or without the CSRF token.
async fn call(
    server: &TestServer,
    who: Option<&Login>,
    csrf: bool,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = server.http.request(method, server.console_url(path));
    if let Some(who) = who {
        request = request.header(header::COOKIE, &who.cookie);
        if csrf {
            request = request.header("x-csrf-token", &who.csrf);
        }
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("console request");
    let status = response.status();
    let text = response.text().await.expect("a well-formed answer");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn sessions_roles_csrf_and_the_audit_log(backend: Backend) {
    let (_db, server) = console_server(backend).await;

    // The page itself is public, with a policy that allows no other origin's script.
    let page = server
        .http
        .get(server.console_url("/"))
        .send()
        .await
        .expect("a well-formed answer");
    assert_eq!(page.status(), StatusCode::OK);
    let csp = page.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .expect("a well-formed answer")
        .to_owned();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert_eq!(page.headers()[header::X_FRAME_OPTIONS], "DENY");

    // Every API route refuses without a session.
    for (method, path) in [
        (Method::GET, "/api/me"),
        (Method::POST, "/api/logout"),
        (Method::GET, "/api/status"),
        (Method::GET, "/api/audit"),
        (Method::GET, "/api/users"),
        (Method::POST, "/api/users"),
        (Method::DELETE, "/api/users/admin"),
    ] {
        let (status, body) =
            call(&server, None, false, method.clone(), path, Some(json!({}))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}: {body}");
        assert_eq!(body["error"], "no_session", "{method} {path}");
    }
    // A forged cookie is no session either.
    let forged = Login {
        cookie: "muster_console=forged-token".into(),
        csrf: "x".into(),
        role: "admin".into(),
    };
    let (status, _) = forged.send(&server, Method::GET, "/api/me", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // The configured admin logs in; a wrong password or an unknown user does not.
    assert_eq!(
        login(&server, "admin", "wrong-password").await.err(),
        Some(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        login(&server, "nobody", ADMIN_PASSWORD).await.err(),
        Some(StatusCode::UNAUTHORIZED)
    );
    let admin = login(&server, "admin", ADMIN_PASSWORD)
        .await
        .expect("admin logs in");
    assert_eq!(admin.role, "admin");
    let (status, me) = admin.get(&server, "/api/me").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["username"], "admin");

    // A change without the CSRF token is refused and changes nothing.
    let new_user = json!({"username": "viewer", "password": "viewer-password", "role": "readonly"});
    let (status, body) = admin
        .send_without_csrf(&server, Method::POST, "/api/users", Some(new_user.clone()))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("csrf"))
    );
    let wrong = Login {
        csrf: "not-the-token".into(),
        ..admin_copy(&admin)
    };
    let (status, _) = wrong.post(&server, "/api/users", new_user.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        login(&server, "viewer", "viewer-password").await.err(),
        Some(StatusCode::UNAUTHORIZED),
        "the refused change made no user"
    );

    // With it, the admin adds users; bad names, short passwords and unknown roles are refused.
    let (status, body) = admin.post(&server, "/api/users", new_user.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = admin.post(&server, "/api/users", new_user).await;
    assert_eq!(status, StatusCode::CONFLICT, "a name is taken once");
    for bad in [
        json!({"username": "<script>", "password": "long-enough", "role": "readonly"}),
        json!({"username": "ok", "password": "short", "role": "readonly"}),
        json!({"username": "ok", "password": "long-enough", "role": "root"}),
    ] {
        let (status, body) = admin.post(&server, "/api/users", bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let (status, body) = admin
        .post(
            &server,
            "/api/users",
            json!({"username": "dev", "password": "developer-password", "role": "developer"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, users) = admin.get(&server, "/api/users").await;
    let names: Vec<&str> = users["users"]
        .as_array()
        .expect("a well-formed answer")
        .iter()
        .map(|u| u["username"].as_str().expect("a well-formed answer"))
        .collect();
    assert_eq!(names, ["admin", "dev", "viewer"]);
    assert!(
        users.to_string().find("argon2").is_none(),
        "no hash leaves the server"
    );

    // A read-only user sees the status and the audit log and changes nothing; nor does a
    // developer manage console users.
    let viewer = login(&server, "viewer", "viewer-password")
        .await
        .expect("viewer logs in");
    assert_eq!(viewer.role, "readonly");
    let (status, _) = viewer.get(&server, "/api/status").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = viewer.get(&server, "/api/audit").await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = viewer
        .post(
            &server,
            "/api/users",
            json!({"username": "sneaky", "password": "sneaky-password", "role": "admin"}),
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("forbidden"))
    );
    let dev = login(&server, "dev", "developer-password")
        .await
        .expect("developer logs in");
    let (status, _) = dev
        .send(&server, Method::DELETE, "/api/users/viewer", None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // The configured admin cannot be deleted; another user can, and their session ends with them.
    let (status, _) = admin
        .send(&server, Method::DELETE, "/api/users/admin", None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = admin
        .send(&server, Method::DELETE, "/api/users/dev", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = dev.get(&server, "/api/me").await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a deleted user's session is over"
    );
    let (status, _) = admin
        .send(&server, Method::DELETE, "/api/users/dev", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Every change is in the audit log, newest first, with who made it; it pages.
    let (_, log) = viewer.get(&server, "/api/audit").await;
    let entries = log["entries"].as_array().expect("a well-formed answer");
    let seen: Vec<(&str, &str, &str)> = entries
        .iter()
        .map(|e| {
            (
                e["username"].as_str().expect("a well-formed answer"),
                e["action"].as_str().expect("a well-formed answer"),
                e["target"].as_str().expect("a well-formed answer"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("admin", "console_user_delete", "dev"),
            ("admin", "console_user_create", "dev"),
            ("admin", "console_user_create", "viewer"),
        ]
    );
    assert_eq!(entries[1]["detail"]["role"], "developer");
    let (_, first) = viewer.get(&server, "/api/audit?limit=2").await;
    assert_eq!(
        first["entries"]
            .as_array()
            .expect("a well-formed answer")
            .len(),
        2
    );
    let next = first["next"].as_i64().expect("a next page");
    let (_, second) = viewer
        .get(&server, &format!("/api/audit?limit=2&before={next}"))
        .await;
    assert_eq!(second["entries"][0]["target"], "viewer");
    assert!(second["next"].is_null());

    // A logout ends the session for good.
    let (status, _) = viewer.post(&server, "/api/logout", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = viewer.get(&server, "/api/status").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    server.stop().await.expect("a well-formed answer");
}

fn admin_copy(login: &Login) -> Login {
    Login {
        cookie: login.cookie.clone(),
        csrf: login.csrf.clone(),
        role: login.role.clone(),
    }
}

async fn login_attempts_are_limited_and_sessions_expire(backend: Backend) {
    // Three a minute: a token comes back every 20 s (real time), far longer than the test's
    // three slow password checks take even on a busy machine.
    let (_db, server) = console_server_with(backend, |config| {
        config.console.logins_per_ip_per_min = 3;
    })
    .await;
    let admin = login(&server, "admin", ADMIN_PASSWORD)
        .await
        .expect("admin logs in");

    // The session lasts console.session_expiry_sec on the server's clock.
    server.clock.advance(Duration::from_secs(3599));
    let (status, _) = admin.get(&server, "/api/me").await;
    assert_eq!(status, StatusCode::OK);
    server.clock.advance(Duration::from_secs(2));
    let (status, _) = admin.get(&server, "/api/me").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "expired");

    // Three attempts a minute per IP (the login above was the first), then refused even with
    // the right password.
    for _ in 0..2 {
        assert_eq!(
            login(&server, "admin", "guess").await.err(),
            Some(StatusCode::UNAUTHORIZED)
        );
    }
    assert_eq!(
        login(&server, "admin", ADMIN_PASSWORD).await.err(),
        Some(StatusCode::TOO_MANY_REQUESTS)
    );
    server.stop().await.expect("a well-formed answer");
}

async fn a_console_user_keeps_only_their_newest_sessions(backend: Backend) {
    let (_db, server) = console_server_with(backend, |config| {
        config.console.max_sessions_per_user = 2;
    })
    .await;
    let mut logins = Vec::new();
    for _ in 0..3 {
        logins.push(
            login(&server, "admin", ADMIN_PASSWORD)
                .await
                .expect("admin logs in"),
        );
        server.clock.advance(Duration::from_secs(1));
    }
    let mut statuses = Vec::new();
    for who in &logins {
        statuses.push(
            call(&server, Some(who), false, Method::GET, "/api/me", None)
                .await
                .0,
        );
    }
    assert_eq!(
        statuses,
        [StatusCode::UNAUTHORIZED, StatusCode::OK, StatusCode::OK],
        "the third login ended the first"
    );
    server.stop().await.expect("stopped");
}

/// A player made through the game API: (user id, token).
async fn player(
    server: &TestServer,
    device: &str,
    username: &str,
    display_name: &str,
) -> (String, String) {
    let (status, body) = server
        .authenticate(
            "device",
            &format!("create=true&username={username}"),
            json!({"id": device}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let token = body["token"].as_str().expect("a token").to_owned();
    let update = server
        .http
        .put(server.url("/v2/account"))
        .bearer_auth(&token)
        .json(&json!({"display_name": display_name}))
        .send()
        .await
        .expect("account update");
    assert!(update.status().is_success());
    let (_, account) = server.get_with_token("/v2/account", &token).await;
    (
        account["user"]["id"].as_str().expect("an id").to_owned(),
        token,
    )
}

async fn players_found_and_changed_storage_edited_over_its_version(backend: Backend) {
    let (_db, server) = console_server(backend).await;
    let admin = login(&server, "admin", ADMIN_PASSWORD)
        .await
        .expect("admin logs in");
    let (ana, ana_token) = player(&server, "device-ana-0001", "ana", "Ana Stormborn").await;
    let (bob, _) = player(&server, "device-bob-0001", "bob", "Bobby Tables").await;
    for n in 0..3 {
        player(
            &server,
            &format!("device-extra-{n:04}"),
            &format!("extra{n}"),
            "Extra",
        )
        .await;
    }

    // Found by the start of a display name in any case, by username, by device, by id.
    let found = |body: &Value| -> Vec<String> {
        body["accounts"]
            .as_array()
            .expect("accounts")
            .iter()
            .map(|a| a["username"].as_str().expect("name").to_owned())
            .collect()
    };
    for (query, expected) in [
        ("ana%20storm", vec!["ana"]),
        ("BOBBY", vec!["bob"]),
        ("extra", vec!["extra0", "extra1", "extra2"]),
        ("device-bob-0001", vec!["bob"]),
        (ana.as_str(), vec!["ana"]),
        ("nobody-at-all", vec![]),
        ("%25", vec![]),
    ] {
        let (status, body) = admin
            .get(&server, &format!("/api/accounts?q={query}"))
            .await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
        assert_eq!(found(&body), expected, "{query}");
    }
    // An empty search lists every account by username.
    let (_, all) = admin.get(&server, "/api/accounts").await;
    assert_eq!(found(&all), ["ana", "bob", "extra0", "extra1", "extra2"]);

    // A wallet change goes through the ledger (reason console) and the audit log; an overdraw
    // is refused and changes nothing.
    let (_, before) = admin.get(&server, &format!("/api/accounts/{bob}")).await;
    let coins: i64 =
        serde_json::from_str::<Value>(before["account"]["wallet"].as_str().expect("wallet"))
            .expect("json")["coins"]
            .as_i64()
            .unwrap_or(0);
    let (status, body) = admin
        .post(
            &server,
            &format!("/api/accounts/{bob}/wallet"),
            json!({"changeset": {"coins": 40, "gems": 3}, "reason": "support ticket 12"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["wallet"]["coins"], coins + 40);
    let (status, body) = admin
        .post(
            &server,
            &format!("/api/accounts/{bob}/wallet"),
            json!({"changeset": {"gems": -4}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "an overdraw: {body}");
    let (_, after) = admin.get(&server, &format!("/api/accounts/{bob}")).await;
    let wallet: Value =
        serde_json::from_str(after["account"]["wallet"].as_str().expect("wallet")).expect("json");
    assert_eq!(wallet["gems"], 3);
    assert_eq!(after["ledger"][0]["reason"], "console");
    assert_eq!(
        after["ledger"][0]["metadata"]["reason"],
        "support ticket 12"
    );
    for bad in [json!({"changeset": {}}), json!({"changeset": {"coins": 0}})] {
        let (status, _) = admin
            .post(&server, &format!("/api/accounts/{bob}/wallet"), bad)
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
    let (status, _) = admin
        .post(
            &server,
            "/api/accounts/not-an-id/wallet",
            json!({"changeset": {"coins": 1}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Metadata must be an object; a ban keeps the player out until the unban.
    let (status, _) = admin
        .post(
            &server,
            &format!("/api/accounts/{ana}/metadata"),
            json!({"metadata": "[1]"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = admin
        .post(
            &server,
            &format!("/api/accounts/{ana}/metadata"),
            json!({"metadata": {"vip": true}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, account) = server.get_with_token("/v2/account", &ana_token).await;
    assert_eq!(account["user"]["metadata"], r#"{"vip":true}"#);
    let (status, _) = admin
        .post(&server, &format!("/api/accounts/{ana}/ban"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server
        .authenticate("device", "", json!({"id": "device-ana-0001"}))
        .await;
    assert_eq!(status, 403, "banned");
    let (status, _) = admin
        .post(&server, &format!("/api/accounts/{ana}/unban"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server
        .authenticate("device", "", json!({"id": "device-ana-0001"}))
        .await;
    assert_eq!(status, 200, "unbanned");

    // A storage object edited over the version read; a stale version is refused.
    let write = server
        .http
        .put(server.url("/v2/storage"))
        .bearer_auth(&ana_token)
        .json(
            &json!({"objects": [{"collection": "saves", "key": "slot", "value": "{\"level\":1}"}]}),
        )
        .send()
        .await
        .expect("storage write");
    assert!(write.status().is_success());
    let (status, listing) = admin
        .get(
            &server,
            &format!("/api/storage?collection=saves&owner={ana}"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{listing}");
    let version = listing["objects"][0]["version"]
        .as_str()
        .expect("a version")
        .to_owned();
    let edit = |value: &str, version: &str| json!({"collection": "saves", "key": "slot", "owner": ana, "value": value, "version": version});
    let (status, saved) = admin
        .post(
            &server,
            "/api/storage/object",
            edit(r#"{"level":2}"#, &version),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    let (status, body) = admin
        .post(
            &server,
            "/api/storage/object",
            edit(r#"{"level":3}"#, &version),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "stale: {body}");
    let (status, body) = admin
        .post(&server, "/api/storage/object", edit(r#"{"level":3}"#, ""))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "no version: {body}");
    let (_, object) = admin
        .get(
            &server,
            &format!("/api/storage/object?collection=saves&key=slot&owner={ana}"),
        )
        .await;
    assert_eq!(object["value"], r#"{"level":2}"#);

    // Each change in the audit log, newest first.
    let (_, log) = admin.get(&server, "/api/audit").await;
    let actions: Vec<&str> = log["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["action"].as_str().expect("action"))
        .collect();
    assert_eq!(
        actions,
        [
            "storage_write",
            "account_unban",
            "account_ban",
            "account_metadata",
            "wallet_update"
        ]
    );
    server.stop().await.expect("stopped");
}

async fn boards_matches_cluster_and_the_configuration(backend: Backend) {
    let (_db, server) = console_server_with(backend, |config| {
        config.leaderboards.boards = vec![muster::leaderboards::NewLeaderboard {
            id: "weekly".into(),
            ..Default::default()
        }];
    })
    .await;
    let admin = login(&server, "admin", ADMIN_PASSWORD)
        .await
        .expect("admin logs in");
    let (carla, token) = player(&server, "device-carla-001", "carla", "Carla").await;
    let wrote = server
        .http
        .post(server.url("/v2/leaderboard/weekly"))
        .bearer_auth(&token)
        .json(&json!({"score": "42"}))
        .send()
        .await
        .expect("record");
    assert!(wrote.status().is_success());

    let (status, boards) = admin.get(&server, "/api/leaderboards").await;
    assert_eq!(status, StatusCode::OK, "{boards}");
    assert_eq!(boards["leaderboards"][0]["id"], "weekly");
    let (_, records) = admin.get(&server, "/api/leaderboards/weekly/records").await;
    assert_eq!(records["records"][0]["owner_id"], carla.as_str());
    assert_eq!(records["records"][0]["score"], "42");
    // A board's metadata edited from the console (not only through SQL); what is not a JSON
    // object is refused and changes nothing.
    let (status, _) = admin
        .post(
            &server,
            "/api/leaderboards/weekly/metadata",
            json!({"metadata": "{\"season\":3}"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    for bad in ["[1]", "not json"] {
        let (status, body) = admin
            .post(
                &server,
                "/api/leaderboards/weekly/metadata",
                json!({ "metadata": bad }),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let (status, _) = admin
        .post(
            &server,
            "/api/leaderboards/nothing/metadata",
            json!({"metadata": "{}"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, boards) = admin.get(&server, "/api/leaderboards").await;
    assert_eq!(boards["leaderboards"][0]["metadata"], r#"{"season":3}"#);
    let (_, game_view) = server
        .get_with_token("/v2/leaderboard/weekly", &token)
        .await;
    assert_eq!(
        game_view["records"][0]["owner_id"],
        carla.as_str(),
        "{game_view}"
    );
    let (status, _) = admin
        .send(
            &server,
            Method::DELETE,
            &format!("/api/leaderboards/weekly/records/{carla}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, records) = admin.get(&server, "/api/leaderboards/weekly/records").await;
    assert!(
        records["records"].as_array().is_none_or(Vec::is_empty),
        "{records}"
    );
    let (status, _) = admin
        .get(&server, "/api/leaderboards/nothing/records")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A room's stored messages, read as the server; a group listed with its members; a
    // notification sent from the console reaches the player.
    let mut chatter = support::Client::connect(&server, "console-chatter").await;
    let channel = chatter
        .ok(
            "channel_join",
            json!({"target": "lobby", "type": 1, "persistence": true}),
            "channel",
        )
        .await;
    let channel_id = channel["id"].as_str().expect("channel id").to_owned();
    chatter
        .ok(
            "channel_message_send",
            json!({"channel_id": channel_id, "content": "{\"text\":\"<b>hello</b>\"}"}),
            "channel_message_ack",
        )
        .await;
    let (status, messages) = admin.get(&server, "/api/chat/messages?channel=lobby").await;
    assert_eq!(status, StatusCode::OK, "{messages}");
    assert_eq!(messages["channel_id"], channel_id.as_str());
    assert_eq!(
        messages["messages"][0]["content"],
        r#"{"text":"<b>hello</b>"}"#
    );
    let made = server
        .http
        .post(server.url("/v2/group"))
        .bearer_auth(&token)
        .json(&json!({"name": "Night Owls", "open": true}))
        .send()
        .await
        .expect("group");
    assert!(made.status().is_success());
    let group: Value = made.json().await.expect("group json");
    let (_, groups) = admin.get(&server, "/api/groups?name=night").await;
    assert_eq!(groups["groups"][0]["name"], "Night Owls", "{groups}");
    let (_, members) = admin
        .get(
            &server,
            &format!("/api/groups/{}/users", group["id"].as_str().expect("id")),
        )
        .await;
    assert_eq!(members["group_users"][0]["user"]["id"], carla.as_str());
    let (status, _) = admin
        .post(
            &server,
            &format!("/api/accounts/{carla}/notify"),
            json!({"subject": "Server maintenance", "content": "{\"at\":\"noon\"}", "code": 101}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, listed) = server
        .get_with_token("/v2/notification?limit=10", &token)
        .await;
    assert_eq!(
        listed["notifications"][0]["subject"], "Server maintenance",
        "{listed}"
    );

    // An invite link made by a player: its clicks on the console, and disabled from it.
    let made = server
        .http
        .post(server.links_url("/"))
        .bearer_auth(&token)
        .json(&json!({"url": "https://game.example.com/join/7", "slug": "join-seven"}))
        .send()
        .await
        .expect("link");
    assert!(
        made.status().is_success(),
        "{}",
        made.text().await.unwrap_or_default()
    );
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let visit = no_redirects
        .get(server.links_url("/join-seven"))
        .send()
        .await
        .expect("visit");
    assert_eq!(visit.status(), StatusCode::PERMANENT_REDIRECT);
    let (status, link) = admin.get(&server, "/api/links/join-seven").await;
    assert_eq!(status, StatusCode::OK, "{link}");
    assert_eq!(link["url"], "https://game.example.com/join/7");
    assert_eq!(link["clicks"][0][1], 1, "{link}");
    let (status, _) = admin
        .send(&server, Method::DELETE, "/api/links/join-seven", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let gone = no_redirects
        .get(server.links_url("/join-seven"))
        .send()
        .await
        .expect("visit");
    assert_eq!(gone.status(), StatusCode::GONE);

    let (status, matches) = admin.get(&server, "/api/matches").await;
    assert_eq!(status, StatusCode::OK, "{matches}");
    assert!(matches["matches"].is_array() && matches["rooms"].is_array());
    let (status, _) = admin
        .post(
            &server,
            "/api/matches/not-a-match/signal",
            json!({"data": "x"}),
        )
        .await;
    assert!(status.is_client_error());

    let (_, cluster) = admin.get(&server, "/api/cluster").await;
    assert_eq!(cluster["node"], "local");
    assert_eq!(cluster["clustered"], false);

    // The configuration, for admins only, with its secrets redacted.
    let (status, config) = admin.get(&server, "/api/config").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(config["server_key"], "(redacted)");
    assert_eq!(config["console"]["admin_password"], "(redacted)");
    assert!(!config.to_string().contains(ADMIN_PASSWORD));
    let (status, _) = admin
        .post(
            &server,
            "/api/users",
            json!({"username": "dev", "password": "developer-password", "role": "developer"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let dev = login(&server, "dev", "developer-password")
        .await
        .expect("developer logs in");
    let (status, _) = dev.get(&server, "/api/config").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    server.stop().await.expect("stopped");
}

/// Creates an arena room as `owner` and joins `players` to it over their sockets: its id.
async fn arena_room(server: &TestServer, players: &mut [&mut support::Client]) -> String {
    let made = server
        .http
        .post(server.url("/v2/rooms"))
        .bearer_auth(&players[0].token)
        .json(&json!({"handler": "arena", "capacity": 4}))
        .send()
        .await
        .expect("room");
    assert_eq!(made.status(), StatusCode::CREATED);
    let room: Value = made.json().await.expect("room json");
    let room = room["room_id"].as_str().expect("room id").to_owned();
    for player in players.iter_mut() {
        let info = server
            .http
            .get(server.url(&format!("/v2/rooms/{room}/connection")))
            .bearer_auth(&player.token)
            .send()
            .await
            .expect("connection info");
        let info: Value = info.json().await.expect("connection json");
        let joined = player
            .request(json!({"match_join": {"token": info["ticket"]}}))
            .await;
        assert_eq!(joined["match"]["match_id"], room.as_str(), "{joined}");
    }
    room
}

async fn a_match_inspected_and_kicked_parties_a_players_data_and_the_autoscaler(backend: Backend) {
    use muster_autoscaler::calendar::Calendar;
    use muster_autoscaler::keda::Desired;
    use muster_autoscaler::run::{channels, run, RunSettings};

    // The autoscaler's own endpoint, which the console reads its decisions from.
    let autoscaler = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("autoscaler listener");
    let autoscaler_url = format!(
        "http://{}",
        autoscaler.local_addr().expect("autoscaler address")
    );
    let (_db, server) = console_server_with(backend, |config| {
        config.console.autoscaler_url = autoscaler_url.clone();
    })
    .await;
    let admin = login(&server, "admin", ADMIN_PASSWORD)
        .await
        .expect("admin logs in");
    let (status, none_yet) = admin.get(&server, "/api/autoscaler").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(none_yet["configured"], true);
    assert!(
        none_yet["error"].is_string(),
        "nothing listens yet: {none_yet}"
    );

    // A match's presences and state, from the console; a player kicked from it, and the other
    // told so.
    let mut ana = support::Client::connect(&server, "console-match-ana").await;
    let mut ben = support::Client::connect(&server, "console-match-ben").await;
    let room = arena_room(&server, &mut [&mut ana, &mut ben]).await;
    let (status, seen) = admin.get(&server, &format!("/api/matches/{room}")).await;
    assert_eq!(status, StatusCode::OK, "{seen}");
    assert_eq!(seen["authoritative"], true);
    assert_eq!(seen["handler"], "arena");
    let presences = seen["presences"].as_array().expect("presences");
    assert_eq!(presences.len(), 2, "{seen}");
    let ben_presence = presences
        .iter()
        .find(|p| p["user_id"] == ben.user_id.as_str())
        .expect("ben is in the match")
        .clone();
    let state: Value =
        serde_json::from_str(seen["state"].as_str().expect("the arena shows its state"))
            .expect("the state is JSON");
    assert_eq!(
        state["players"].as_array().map(Vec::len),
        Some(2),
        "{state}"
    );
    let (status, _) = admin
        .send_without_csrf(
            &server,
            Method::POST,
            &format!("/api/matches/{room}/kick"),
            Some(json!({"session_id": ben_presence["session_id"]})),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "no kick without the CSRF token"
    );
    let (status, _) = admin
        .post(
            &server,
            &format!("/api/matches/{room}/kick"),
            json!({"session_id": ben_presence["session_id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // Ana was told of her own join (as on Nakama), of Ben's, then of his leave.
    let own = ana.event("match_presence_event").await;
    assert_eq!(own["joins"][0]["user_id"], ana.user_id.as_str(), "{own}");
    let joined = ana.event("match_presence_event").await;
    assert_eq!(
        joined["joins"][0]["user_id"],
        ben.user_id.as_str(),
        "{joined}"
    );
    let left = ana.event("match_presence_event").await;
    assert_eq!(left["leaves"][0]["user_id"], ben.user_id.as_str(), "{left}");
    let (_, seen) = admin.get(&server, &format!("/api/matches/{room}")).await;
    assert_eq!(
        seen["presences"].as_array().map(Vec::len),
        Some(1),
        "{seen}"
    );
    // Kicking someone not in the match, or from a match that is not there, is refused.
    for (path, session) in [
        (
            format!("/api/matches/{room}/kick"),
            ben_presence["session_id"].clone(),
        ),
        (format!("/api/matches/{room}/kick"), json!("not-a-session")),
        (
            format!("/api/matches/{}.local/kick", uuid::Uuid::new_v4()),
            ben_presence["session_id"].clone(),
        ),
    ] {
        let (status, body) = admin
            .post(&server, &path, json!({ "session_id": session }))
            .await;
        assert!(status.is_client_error(), "{path}: {status} {body}");
    }
    let (_, audit) = admin.get(&server, "/api/audit").await;
    assert_eq!(audit["entries"][0]["action"], "match_kick", "{audit}");

    // A party on this node, with its leader; a socket's status on the account page.
    let party = ana
        .ok(
            "party_create",
            json!({"open": true, "max_size": 4, "label": "raid night"}),
            "party",
        )
        .await;
    let (status, parties) = admin.get(&server, "/api/parties").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        parties["parties"][0]["party_id"], party["party_id"],
        "{parties}"
    );
    assert_eq!(parties["parties"][0]["label"], "raid night");
    assert_eq!(
        parties["parties"][0]["leader"]["user_id"],
        ana.user_id.as_str()
    );
    let updated = ana
        .call("status_update", json!({"status": "in a raid"}))
        .await;
    assert!(updated.get("error").is_none(), "{updated}");

    // The player's storage across collections, page by page, and their chat messages.
    let objects: Vec<Value> = (0..60)
        .map(|i| {
            json!({"collection": if i % 2 == 0 { "saves" } else { "settings" },
                   "key": format!("k{i:02}"), "value": format!("{{\"n\":{i}}}")})
        })
        .collect();
    let wrote = server
        .http
        .put(server.url("/v2/storage"))
        .bearer_auth(&ana.token)
        .json(&json!({ "objects": objects }))
        .send()
        .await
        .expect("storage write");
    assert!(wrote.status().is_success());
    let channel = ana
        .ok(
            "channel_join",
            json!({"target": "guild-hall", "type": 1, "persistence": true}),
            "channel",
        )
        .await;
    for text in ["first", "second"] {
        ana.ok(
            "channel_message_send",
            json!({"channel_id": channel["id"], "content": format!("{{\"text\":\"{text}\"}}")}),
            "channel_message_ack",
        )
        .await;
    }
    let (status, account) = admin
        .get(&server, &format!("/api/accounts/{}", ana.user_id))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(account["sessions"][0]["status"], "in a raid", "{account}");
    assert_eq!(account["messages"][0]["content"], r#"{"text":"second"}"#);
    assert_eq!(account["messages"][1]["content"], r#"{"text":"first"}"#);
    assert!(account["messages_before"].is_null());
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut page = account["storage"].clone();
    let mut cursor = account["storage_cursor"].clone();
    loop {
        for object in page.as_array().expect("objects") {
            keys.push((
                object["collection"]
                    .as_str()
                    .expect("collection")
                    .to_owned(),
                object["key"].as_str().expect("key").to_owned(),
            ));
        }
        let Some(next) = cursor.as_str() else { break };
        let (status, more) = admin
            .get(
                &server,
                &format!("/api/accounts/{}/storage?cursor={next}", ana.user_id),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{more}");
        page = more["objects"].clone();
        cursor = more["cursor"].clone();
    }
    let mut expected = keys.clone();
    expected.sort();
    expected.dedup();
    assert_eq!(keys.len(), 60, "every object once");
    assert_eq!(keys, expected, "in (collection, key) order");
    // A cursor of another player's listing, or none at all, is refused.
    let (status, _) = admin
        .get(
            &server,
            &format!("/api/accounts/{}/storage?cursor=e30", ana.user_id),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, export) = admin
        .get(&server, &format!("/api/accounts/{}/export", ana.user_id))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(export["storage"].as_array().map(Vec::len), Some(60));
    assert_eq!(export["storage"][0]["value"], r#"{"n":0}"#, "values whole");
    assert_eq!(export["messages"].as_array().map(Vec::len), Some(2));

    // The autoscaler's decisions, with their reasons, once it runs: two sockets at one a
    // replica want two replicas.
    let (outputs, shared) = channels(Desired { replicas: 1 }, &Calendar::default(), None);
    let settings = RunSettings {
        units_per_replica: 1.0,
        target: 1.0,
        max_replicas: 10,
        ..RunSettings::new(vec![server.url("/metrics")])
    };
    tokio::spawn(run(settings, outputs, std::future::pending()));
    tokio::spawn(async move {
        let _ = axum::serve(autoscaler, muster_autoscaler::http::router(shared)).await;
    });
    let decision = |answer: &Value| {
        answer["decisions"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["kind"] == "decision").cloned())
    };
    support::eventually("the console shows a decision", || {
        let (server, admin) = (&server, &admin);
        async move {
            let (_, answer) = call(
                server,
                Some(admin),
                false,
                Method::GET,
                "/api/autoscaler",
                None,
            )
            .await;
            decision(&answer).is_some()
        }
    })
    .await;
    let (_, answer) = admin.get(&server, "/api/autoscaler").await;
    let decided = decision(&answer).expect("a decision");
    assert_eq!(decided["to_replicas"], 2, "{decided}");
    assert!(decided["why"].as_str().is_some_and(|why| !why.is_empty()));
    assert!(decided["rule"].is_string());
    server.stop().await.expect("stopped");
}
