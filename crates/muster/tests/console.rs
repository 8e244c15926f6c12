//! The console's API on SQLite and PostgreSQL: logging in (slow hashes, limits, expiry), every
//! route refusing without a session, a change refused without the CSRF token or with a role
//! too low, console users managed by an admin, and every change in the audit log. The pages
//! themselves are driven in a real browser (clients/browser/test/console.test.mjs).

mod support;

use std::time::Duration;

use reqwest::{header, Method, StatusCode};
use serde_json::{json, Value};
use support::{Backend, Database, TestServer};

on_both_backends!(
    sessions_roles_csrf_and_the_audit_log,
    login_attempts_are_limited_and_sessions_expire
);

const ADMIN_PASSWORD: &str = "admin-password-1";

async fn console_server(backend: Backend) -> (Database, TestServer) {
    let db = Database::new(backend).await;
    let mut config = db.config();
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
    let (status, _) = call(&server, Some(&forged), true, Method::GET, "/api/me", None).await;
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
    let (status, me) = call(&server, Some(&admin), false, Method::GET, "/api/me", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["username"], "admin");

    // A change without the CSRF token is refused and changes nothing.
    let new_user = json!({"username": "viewer", "password": "viewer-password", "role": "readonly"});
    let (status, body) = call(
        &server,
        Some(&admin),
        false,
        Method::POST,
        "/api/users",
        Some(new_user.clone()),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("csrf"))
    );
    let wrong = Login {
        csrf: "not-the-token".into(),
        ..admin_copy(&admin)
    };
    let (status, _) = call(
        &server,
        Some(&wrong),
        true,
        Method::POST,
        "/api/users",
        Some(new_user.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        login(&server, "viewer", "viewer-password").await.err(),
        Some(StatusCode::UNAUTHORIZED),
        "the refused change made no user"
    );

    // With it, the admin adds users; bad names, short passwords and unknown roles are refused.
    let (status, body) = call(
        &server,
        Some(&admin),
        true,
        Method::POST,
        "/api/users",
        Some(new_user.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = call(
        &server,
        Some(&admin),
        true,
        Method::POST,
        "/api/users",
        Some(new_user),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "a name is taken once");
    for bad in [
        json!({"username": "<script>", "password": "long-enough", "role": "readonly"}),
        json!({"username": "ok", "password": "short", "role": "readonly"}),
        json!({"username": "ok", "password": "long-enough", "role": "root"}),
    ] {
        let (status, body) = call(
            &server,
            Some(&admin),
            true,
            Method::POST,
            "/api/users",
            Some(bad.clone()),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let (status, body) = call(
        &server,
        Some(&admin),
        true,
        Method::POST,
        "/api/users",
        Some(json!({"username": "dev", "password": "developer-password", "role": "developer"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, users) = call(
        &server,
        Some(&admin),
        false,
        Method::GET,
        "/api/users",
        None,
    )
    .await;
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
    let (status, _) = call(
        &server,
        Some(&viewer),
        false,
        Method::GET,
        "/api/status",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(
        &server,
        Some(&viewer),
        false,
        Method::GET,
        "/api/audit",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(
        &server,
        Some(&viewer),
        true,
        Method::POST,
        "/api/users",
        Some(json!({"username": "sneaky", "password": "sneaky-password", "role": "admin"})),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::FORBIDDEN, Some("forbidden"))
    );
    let dev = login(&server, "dev", "developer-password")
        .await
        .expect("developer logs in");
    let (status, _) = call(
        &server,
        Some(&dev),
        true,
        Method::DELETE,
        "/api/users/viewer",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // The configured admin cannot be deleted; another user can, and their session ends with them.
    let (status, _) = call(
        &server,
        Some(&admin),
        true,
        Method::DELETE,
        "/api/users/admin",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = call(
        &server,
        Some(&admin),
        true,
        Method::DELETE,
        "/api/users/dev",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(&server, Some(&dev), false, Method::GET, "/api/me", None).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a deleted user's session is over"
    );
    let (status, _) = call(
        &server,
        Some(&admin),
        true,
        Method::DELETE,
        "/api/users/dev",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Every change is in the audit log, newest first, with who made it; it pages.
    let (_, log) = call(
        &server,
        Some(&viewer),
        false,
        Method::GET,
        "/api/audit",
        None,
    )
    .await;
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
    let (_, first) = call(
        &server,
        Some(&viewer),
        false,
        Method::GET,
        "/api/audit?limit=2",
        None,
    )
    .await;
    assert_eq!(
        first["entries"]
            .as_array()
            .expect("a well-formed answer")
            .len(),
        2
    );
    let next = first["next"].as_i64().expect("a next page");
    let (_, second) = call(
        &server,
        Some(&viewer),
        false,
        Method::GET,
        &format!("/api/audit?limit=2&before={next}"),
        None,
    )
    .await;
    assert_eq!(second["entries"][0]["target"], "viewer");
    assert!(second["next"].is_null());

    // A logout ends the session for good.
    let (status, _) = call(
        &server,
        Some(&viewer),
        true,
        Method::POST,
        "/api/logout",
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(
        &server,
        Some(&viewer),
        false,
        Method::GET,
        "/api/status",
        None,
    )
    .await;
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
    let (_db, server) = console_server(backend).await;
    let admin = login(&server, "admin", ADMIN_PASSWORD)
        .await
        .expect("admin logs in");

    // The session lasts console.session_expiry_sec on the server's clock.
    server.clock.advance(Duration::from_secs(3599));
    let (status, _) = call(&server, Some(&admin), false, Method::GET, "/api/me", None).await;
    assert_eq!(status, StatusCode::OK);
    server.clock.advance(Duration::from_secs(2));
    let (status, _) = call(&server, Some(&admin), false, Method::GET, "/api/me", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "expired");

    // Ten attempts a minute per IP (the default), then refused even with the right password.
    for _ in 0..9 {
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
