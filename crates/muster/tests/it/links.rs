//! Invite links over real HTTP, on SQLite and PostgreSQL: creating (JSON and the form), the
//! reverse index under concurrent creates, redirects with query pass-through and per-platform
//! fallbacks, expiry and visit limits, clicks per day and disabling over the authenticated API,
//! QR codes, the app association documents, who may create, and bad input refused clearly.

use crate::support;

use std::time::Duration;

use muster::config::Config;
use serde_json::{json, Value};
use support::{
    assert_error, metric, metric_at, status_and_json, Backend, Binary, Database, TestServer,
};

on_both_backends!(
    create_redirect_and_reuse,
    concurrent_creates_of_one_url_yield_one_code,
    expiry_and_max_visits,
    fallbacks_by_user_agent,
    clicks_per_day_and_disable,
    bad_input_is_refused_and_changes_nothing,
    clicks_survive_kill_9,
    who_may_create,
    requests_per_ip_are_limited,
    index_page_form_and_qr_code,
    app_association_documents,
);

const API_KEY: &str = "links-test-key";
const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";

fn links_config(db: &Database) -> Config {
    let mut config = db.config();
    config.links.api_key = API_KEY.into();
    config.links.requests_per_ip_per_sec = 0;
    config
}

/// A client that does not follow redirects: the tests look at the 308 itself.
fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

async fn create_as(server: &TestServer, bearer: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = server.http.post(server.links_url("/")).json(&body);
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    status_and_json(request.send().await.expect("create")).await
}

async fn create(server: &TestServer, body: Value) -> (u16, Value) {
    create_as(server, Some(API_KEY), body).await
}

/// `GET /{code}` (plus `rest`, e.g. a query) as `user_agent`: (status, Location).
async fn follow(server: &TestServer, path: &str, user_agent: &str) -> (u16, Option<String>) {
    let response = no_redirects()
        .get(server.links_url(path))
        .header("user-agent", user_agent)
        .send()
        .await
        .expect("visit");
    let location = response
        .headers()
        .get("location")
        .map(|l| l.to_str().expect("ASCII").to_owned());
    (response.status().as_u16(), location)
}

/// `GET` on the links service.
async fn get(server: &TestServer, path: &str) -> reqwest::Response {
    server
        .http
        .get(server.links_url(path))
        .send()
        .await
        .expect("GET")
}

async fn stats(server: &TestServer, code: &str, bearer: Option<&str>) -> (u16, Value) {
    let mut request = server
        .http
        .get(server.links_url(&format!("/api/links/{code}")));
    if let Some(bearer) = bearer {
        request = request.bearer_auth(bearer);
    }
    status_and_json(request.send().await.expect("stats")).await
}

async fn create_redirect_and_reuse(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(links_config(&db)).await;
    let url = "https://game.example.com/invite?team=red";
    let (status, link) = create(&server, json!({ "url": url })).await;
    assert_eq!(status, 201, "{link}");
    assert_eq!(link["created"], true);
    let code = link["code"].as_str().expect("code").to_owned();
    assert_eq!(code.len(), 7);
    assert!(code.chars().all(|c| c.is_ascii_alphanumeric()), "{code}");
    assert_eq!(link["url"], url);
    assert_eq!(
        link["short_url"],
        format!("http://{}/{code}", server.links_addr.expect("links"))
    );

    let response = no_redirects()
        .get(server.links_url(&format!("/{code}")))
        .send()
        .await
        .expect("visit");
    assert_eq!(response.status(), 308);
    assert_eq!(response.headers()["location"], url);
    assert_eq!(response.headers()["cache-control"], "no-store");

    // The visitor's query string is passed on, after the link's own.
    let (status, location) = follow(&server, &format!("/{code}?ref=friend&x=%20y"), "curl").await;
    assert_eq!(status, 308);
    assert_eq!(
        location.as_deref(),
        Some("https://game.example.com/invite?team=red&ref=friend&x=%20y")
    );

    // The same long URL (in another spelling) gives the same code; another URL another code.
    let (status, again) = create(
        &server,
        json!({ "url": "HTTPS://Game.Example.com/invite?team=red" }),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["code"], code.as_str());
    assert_eq!(again["created"], false);
    let (status, other) = create(&server, json!({ "url": "https://game.example.com/other" })).await;
    assert_eq!(status, 201);
    assert_ne!(other["code"], code.as_str());

    // A custom slug.
    let (status, slugged) = create(&server, json!({ "url": url, "slug": "summer-event" })).await;
    assert_eq!(status, 201, "{slugged}");
    assert_eq!(slugged["code"], "summer-event");
    assert_eq!(
        follow(&server, "/summer-event", "curl").await,
        (308, Some(url.to_owned()))
    );

    // Cached after the first visit: the second comes from memory.
    let hits = r#"muster_links_cache_lookups_total{result="hit"}"#;
    let before = metric(&server, hits).await;
    follow(&server, "/summer-event", "curl").await;
    assert_eq!(metric(&server, hits).await, before + 1.0);
    assert!(
        metric(
            &server,
            r#"muster_links_redirects_total{outcome="redirected"}"#
        )
        .await
            >= 4.0
    );
    assert_eq!(
        metric(&server, r#"muster_links_creates_total{outcome="existing"}"#).await,
        1.0
    );
}

async fn concurrent_creates_of_one_url_yield_one_code(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(links_config(&db)).await;
    let url = "https://game.example.com/launch";
    let creates = (0..32).map(|_| create(&server, json!({ "url": url })));
    let answers = futures_util::future::join_all(creates).await;
    let codes: std::collections::BTreeSet<String> = answers
        .iter()
        .map(|(status, body)| {
            assert!(*status == 200 || *status == 201, "{status} {body}");
            body["code"].as_str().expect("code").to_owned()
        })
        .collect();
    assert_eq!(codes.len(), 1, "{codes:?}");
    let created = answers.iter().filter(|(status, _)| *status == 201).count();
    assert_eq!(created, 1, "exactly one request created the link");
}

async fn expiry_and_max_visits(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(links_config(&db)).await;
    let (status, link) = create(
        &server,
        json!({ "url": "https://game.example.com/weekend", "expires_in_sec": 60 }),
    )
    .await;
    assert_eq!(status, 201, "{link}");
    assert!(link["expires_at"]
        .as_str()
        .expect("expires_at")
        .ends_with('Z'));
    let path = format!("/{}", link["code"].as_str().expect("code"));
    assert_eq!(follow(&server, &path, "curl").await.0, 308);
    server.clock.advance(Duration::from_secs(61));
    assert_eq!(follow(&server, &path, "curl").await, (410, None));
    // A browser gets a page saying so; an API client Nakama's error body.
    let page = server
        .http
        .get(server.links_url(&path))
        .header("accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .expect("visit");
    assert_eq!(page.status(), 410);
    assert!(page.headers()["content-type"]
        .to_str()
        .expect("type")
        .starts_with("text/html"));
    assert!(page.text().await.expect("page").contains("expired"));
    let json = status_and_json(get(&server, &path).await).await;
    assert!(assert_error(&json, 410, 5).contains("expired"));

    // Two visits, then gone; the count is exact.
    let (status, limited) = create(
        &server,
        json!({ "url": "https://game.example.com/one-off", "max_visits": 2 }),
    )
    .await;
    assert_eq!(status, 201);
    let code = limited["code"].as_str().expect("code");
    let path = format!("/{code}");
    assert_eq!(follow(&server, &path, "curl").await.0, 308);
    assert_eq!(follow(&server, &path, "curl").await.0, 308);
    assert_eq!(follow(&server, &path, "curl").await.0, 410);
    assert_eq!(follow(&server, &path, "curl").await.0, 410);
    let (status, read) = stats(&server, code, Some(API_KEY)).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["visits"], 2);
    assert_eq!(read["max_visits"], 2);
    // A one-time invite pasted in a chat: the chat's link preview (and a HEAD request) look
    // without using it up; the friend's tap does.
    let (status, once) = create(
        &server,
        json!({ "url": "https://game.example.com/once", "max_visits": 1 }),
    )
    .await;
    assert_eq!(status, 201);
    let path = format!("/{}", once["code"].as_str().expect("code"));
    let slack = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)";
    assert_eq!(follow(&server, &path, slack).await.0, 308);
    let head = no_redirects()
        .head(server.links_url(&path))
        .send()
        .await
        .expect("HEAD");
    assert_eq!(head.status(), 308);
    assert_eq!(follow(&server, &path, IPHONE).await.0, 308);
    assert_eq!(follow(&server, &path, IPHONE).await.0, 410);
    assert_eq!(
        follow(&server, &path, slack).await.0,
        410,
        "spent, even to a preview"
    );
    let (_, read) = stats(&server, once["code"].as_str().expect("code"), Some(API_KEY)).await;
    assert_eq!(read["visits"], 1, "{read}");

    // Links with limits are never handed out again for the same URL.
    let (status, again) = create(
        &server,
        json!({ "url": "https://game.example.com/one-off", "max_visits": 2 }),
    )
    .await;
    assert_eq!(status, 201);
    assert_ne!(again["code"], code);
}

async fn fallbacks_by_user_agent(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(links_config(&db)).await;
    let (status, link) = create(
        &server,
        json!({
            "url": "https://game.example.com/join/42",
            "fallbacks": {
                "ios": "https://apps.apple.com/app/id123456789",
                "android": "https://play.google.com/store/apps/details?id=com.example.game"
            }
        }),
    )
    .await;
    assert_eq!(status, 201, "{link}");
    let path = format!("/{}?campaign=spring", link["code"].as_str().expect("code"));
    assert_eq!(
        follow(&server, &path, IPHONE).await.1.as_deref(),
        Some("https://apps.apple.com/app/id123456789?campaign=spring")
    );
    assert_eq!(
        follow(&server, &path, ANDROID).await.1.as_deref(),
        Some("https://play.google.com/store/apps/details?id=com.example.game&campaign=spring")
    );
    // No desktop fallback: the link's own URL.
    assert_eq!(
        follow(
            &server,
            &path,
            "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"
        )
        .await
        .1
        .as_deref(),
        Some("https://game.example.com/join/42?campaign=spring")
    );
}

async fn clicks_per_day_and_disable(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = links_config(&db);
    config.links.clicks_flush_ms = 60_000;
    let server = TestServer::start(config).await;
    let (owner, _) = server.device_session("links-owner-device").await;
    let (stranger, _) = server.device_session("links-stranger-device").await;
    let (status, link) = create_as(
        &server,
        Some(&owner),
        json!({ "url": "https://game.example.com/clan/7" }),
    )
    .await;
    assert_eq!(status, 201, "{link}");
    let code = link["code"].as_str().expect("code").to_owned();
    for _ in 0..5 {
        assert_eq!(follow(&server, &format!("/{code}"), "curl").await.0, 308);
    }
    // Read long before the flush period: the read writes pending counts first.
    let (status, read) = stats(&server, &code, Some(&owner)).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["visits"], 5);
    let today = muster::base::clock::rfc3339(server.clock.now_ms())[..10].to_owned();
    assert_eq!(read["clicks"], json!([{ "day": today, "count": 5 }]));
    assert_eq!(read["disabled"], false);
    assert_eq!(stats(&server, &code, Some(API_KEY)).await.1["visits"], 5);
    assert_error(&stats(&server, &code, Some(&stranger)).await, 403, 7);
    assert_error(&stats(&server, &code, None).await, 401, 16);
    assert_error(&stats(&server, &code, Some("not-a-token")).await, 401, 16);
    assert_error(&stats(&server, "nosuchcode", Some(API_KEY)).await, 404, 5);

    let disable = |bearer: &str| {
        server
            .http
            .delete(server.links_url(&format!("/api/links/{code}")))
            .bearer_auth(bearer)
            .send()
    };
    assert_eq!(disable(&stranger).await.expect("delete").status(), 403);
    assert_eq!(follow(&server, &format!("/{code}"), "curl").await.0, 308);
    assert_eq!(disable(&owner).await.expect("delete").status(), 204);
    assert_eq!(follow(&server, &format!("/{code}"), "curl").await.0, 410);
    assert_eq!(
        stats(&server, &code, Some(&owner)).await.1["disabled"],
        true
    );
    // The owner's next link to that URL is a new one.
    let (status, again) = create_as(
        &server,
        Some(&owner),
        json!({ "url": "https://game.example.com/clan/7" }),
    )
    .await;
    assert_eq!(status, 201, "{again}");
    assert_ne!(again["code"], code.as_str());
    // Accounts have their own reverse index: another account gets its own link.
    let (status, theirs) = create_as(
        &server,
        Some(&stranger),
        json!({ "url": "https://game.example.com/clan/7" }),
    )
    .await;
    assert_eq!(status, 201);
    assert_ne!(theirs["code"], again["code"]);

    // Clicks land on the day they happen; the window is chosen with ?days=.
    let (_, daily) = create(&server, json!({ "url": "https://game.example.com/daily" })).await;
    let code = daily["code"].as_str().expect("code");
    let yesterday = muster::base::clock::rfc3339(server.clock.now_ms())[..10].to_owned();
    for _ in 0..3 {
        follow(&server, &format!("/{code}"), "curl").await;
    }
    server.clock.advance(Duration::from_secs(86_400));
    let today = muster::base::clock::rfc3339(server.clock.now_ms())[..10].to_owned();
    follow(&server, &format!("/{code}"), "curl").await;
    let (status, read) = stats(&server, code, Some(API_KEY)).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["visits"], 4);
    assert_eq!(
        read["clicks"],
        json!([{ "day": yesterday, "count": 3 }, { "day": today, "count": 1 }])
    );
    let (_, read) = stats(&server, &format!("{code}?days=1"), Some(API_KEY)).await;
    assert_eq!(read["visits"], 1);
    assert_eq!(read["clicks"], json!([{ "day": today, "count": 1 }]));
    for bad in ["0", "401", "many"] {
        assert_error(
            &stats(&server, &format!("{code}?days={bad}"), Some(API_KEY)).await,
            400,
            3,
        );
    }
}

async fn bad_input_is_refused_and_changes_nothing(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = links_config(&db);
    config.links.blocked_domains = vec!["phish.example".into()];
    config.links.max_url_bytes = 256;
    let server = TestServer::start(config).await;
    let links_host = server.links_addr.expect("links").to_string();
    let cases = [
        (
            json!({ "url": "javascript:alert(1)", "slug": "taken-by-none" }),
            "only http and https",
        ),
        (
            json!({ "url": "data:text/html,<script>alert(1)</script>" }),
            "only http and https",
        ),
        (
            json!({ "url": "ftp://files.example.com/a" }),
            "only http and https",
        ),
        (
            json!({ "url": format!("https://game.example.com/{}", "a".repeat(300)) }),
            "at most 256",
        ),
        (
            json!({ "url": "https://admin:hunter2@game.example.com/" }),
            "user name or password",
        ),
        (
            json!({ "url": "https://login.phish.example/account" }),
            "not allowed",
        ),
        (
            json!({ "url": format!("http://{links_host}/abc1234") }),
            "loop",
        ),
        (json!({ "url": "not a url" }), "not a valid URL"),
        (
            json!({ "url": "https://game.example.com/", "slug": "no/slashes" }),
            "only letters",
        ),
        (
            json!({ "url": "https://game.example.com/", "slug": "ab" }),
            "3 to 64",
        ),
        (
            json!({ "url": "https://game.example.com/", "slug": "api" }),
            "reserved",
        ),
        (
            json!({ "url": "https://game.example.com/", "max_visits": -3 }),
            "max_visits",
        ),
        (
            json!({ "url": "https://game.example.com/", "expires_in_sec": 0 }),
            "expires_in_sec",
        ),
        (
            json!({ "url": "https://game.example.com/", "fallbacks": { "ios": "javascript:x" } }),
            "fallbacks.ios",
        ),
        (
            json!({ "url": "https://game.example.com/", "max_visit": 1 }),
            "unknown field",
        ),
        (
            json!({ "link": "https://game.example.com/" }),
            "unknown field",
        ),
    ];
    for (body, expected) in cases {
        let answer = create(&server, body.clone()).await;
        let message = assert_error(&answer, 400, 3);
        assert!(message.contains(expected), "{body}: {message}");
    }
    let malformed = server
        .http
        .post(server.links_url("/"))
        .bearer_auth(API_KEY)
        .header("content-type", "application/json")
        .body("{\"url\": ")
        .send()
        .await
        .expect("post");
    assert!(assert_error(&status_and_json(malformed).await, 400, 3).contains("Malformed JSON"));
    // A huge body is refused before it is read whole. (On a client of its own: the server
    // closes that connection after its 413, and the shared client must not pick it up again.)
    let huge = reqwest::Client::new()
        .post(server.links_url("/"))
        .bearer_auth(API_KEY)
        .body(vec![b'x'; 1 << 20])
        .send()
        .await
        .expect("post");
    assert_eq!(huge.status(), 413);
    assert_eq!(
        metric(&server, r#"muster_links_creates_total{outcome="created"}"#).await,
        0.0,
        "no refused request created anything"
    );
    // The slug a refused request asked for is still free.
    let (status, _) = create(
        &server,
        json!({ "url": "https://game.example.com/", "slug": "taken-by-none" }),
    )
    .await;
    assert_eq!(status, 201);
    let (status, taken) = create(
        &server,
        json!({ "url": "https://game.example.com/x", "slug": "TAKEN-by-none" }),
    )
    .await;
    assert_eq!(status, 201, "slugs are case-sensitive: {taken}");
    assert!(assert_error(
        &create(
            &server,
            json!({ "url": "https://game.example.com/y", "slug": "taken-by-none" })
        )
        .await,
        409,
        6
    )
    .contains("already in use"));

    // Unknown and impossible codes.
    assert_eq!(follow(&server, "/zzzzzzz", "curl").await, (404, None));
    assert_eq!(follow(&server, "/has.dot", "curl").await, (404, None));
    assert_eq!(
        follow(&server, &format!("/{}", "a".repeat(500)), "curl").await,
        (404, None)
    );
    assert_eq!(follow(&server, "/a/b/c", "curl").await, (404, None));
    assert_eq!(
        metric(
            &server,
            r#"muster_links_redirects_total{outcome="not_found"}"#
        )
        .await,
        3.0
    );
}

async fn clicks_survive_kill_9(backend: Backend) {
    let db = Database::new(backend).await;
    let links_port = support::free_port();
    let start = || {
        let mut command = support::muster_command(&db);
        command
            .env("MUSTER_LINKS__LISTEN", format!("127.0.0.1:{links_port}"))
            .env("MUSTER_GRPC__LISTEN", "")
            .env("MUSTER_LINKS__API_KEY", API_KEY)
            .env("MUSTER_LINKS__CLICKS_FLUSH_MS", "200");
        command
    };
    let port = support::free_port();
    let mut binary = Binary::run(start(), port).await;
    let http = no_redirects();
    let base = format!("http://127.0.0.1:{links_port}");
    let created = http
        .post(format!("{base}/"))
        .bearer_auth(API_KEY)
        .json(&json!({ "url": "https://game.example.com/crash" }))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 201);
    let code = created.json::<Value>().await.expect("JSON")["code"]
        .as_str()
        .expect("code")
        .to_owned();
    for _ in 0..20 {
        let visit = http
            .get(format!("{base}/{code}"))
            .send()
            .await
            .expect("visit");
        assert_eq!(visit.status(), 308);
    }
    // Durable once the periodic flush (every 200 ms here) has written them: wait until the
    // server says nothing is pending, then no shutdown path runs. (Not through the stats API,
    // which flushes before it reads.)
    let node = binary.base();
    support::eventually("the clicks flushed to the database", || async {
        metric_at(&node, r#"muster_links_click_flushes_total{outcome="ok"}"#).await >= 1.0
            && metric_at(&node, "muster_links_clicks_pending").await == 0.0
    })
    .await;
    binary.kill9();
    let _binary = Binary::run(start(), port).await;
    let read = http
        .get(format!("{base}/api/links/{code}"))
        .bearer_auth(API_KEY)
        .send()
        .await
        .expect("stats");
    assert_eq!(read.status(), 200);
    let read: Value = read.json().await.expect("JSON");
    assert_eq!(read["visits"], 20, "{read}");
    assert_eq!(read["clicks"][0]["count"], 20, "{read}");
    // The link itself was durable when its create was answered.
    let visit = http
        .get(format!("{base}/{code}"))
        .send()
        .await
        .expect("visit");
    assert_eq!(visit.status(), 308);
}

async fn who_may_create(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = links_config(&db);
    config.links.creates_per_account_per_min = 2;
    let server = TestServer::start(config).await;
    let body = |n: usize| json!({ "url": format!("https://game.example.com/{n}") });
    // Public creation is off by default.
    assert!(
        assert_error(&create_as(&server, None, body(0)).await, 401, 16).contains("session token")
    );
    assert_error(&create_as(&server, Some("wrong"), body(0)).await, 401, 16);
    let basic = server
        .http
        .post(server.links_url("/"))
        .basic_auth(API_KEY, Some(""))
        .json(&body(0))
        .send()
        .await
        .expect("post");
    assert_error(&status_and_json(basic).await, 401, 16);
    // An account: its own limit per minute.
    let (token, _) = server.device_session("links-creator-device").await;
    assert_eq!(create_as(&server, Some(&token), body(1)).await.0, 201);
    assert_eq!(create_as(&server, Some(&token), body(2)).await.0, 201);
    assert!(
        assert_error(&create_as(&server, Some(&token), body(3)).await, 429, 8).contains("minute")
    );
    // The API key: no limit.
    for n in 4..10 {
        assert_eq!(create(&server, body(n)).await.0, 201);
    }
    server.stop().await.expect("stop");

    let mut config = links_config(&db);
    config.links.public_create = true;
    config.links.public_creates_per_ip_per_min = 3;
    let server = TestServer::start(config).await;
    for n in 10..13 {
        assert_eq!(create_as(&server, None, body(n)).await.0, 201);
    }
    assert_error(&create_as(&server, None, body(13)).await, 429, 8);
}

async fn requests_per_ip_are_limited(backend: Backend) {
    let db = Database::new(backend).await;
    let mut config = links_config(&db);
    config.links.requests_per_ip_per_sec = 1;
    config.links.request_burst = 5;
    let server = TestServer::start(config).await;
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(follow(&server, "/zzzzzzz", "curl").await.0);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 404).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        3,
        "{statuses:?}"
    );
}

async fn index_page_form_and_qr_code(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(links_config(&db)).await;
    let index = get(&server, "/").await;
    assert_eq!(index.status(), 200);
    let csp = index.headers()["content-security-policy"]
        .to_str()
        .expect("csp")
        .to_owned();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    let html = index.text().await.expect("html");
    assert!(
        html.contains("<form method=\"post\" action=\"/\">"),
        "{html}"
    );
    assert!(
        !html.contains("http://") || html.contains("placeholder"),
        "no external assets"
    );

    // The form: a page with the link, or with the reason it was refused (escaped).
    let form = |fields: &[(&str, &str)]| {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        server
            .http
            .post(server.links_url("/"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let made = form(&[("url", "https://game.example.com/form"), ("key", API_KEY)])
        .await
        .expect("form");
    assert_eq!(made.status(), 201);
    let html = made.text().await.expect("html");
    let short = html
        .split("id=\"short-url\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page shows the short URL")
        .to_owned();
    let code = short.rsplit('/').next().expect("code").to_owned();
    assert_eq!(
        follow(&server, &format!("/{code}"), "curl")
            .await
            .1
            .as_deref(),
        Some("https://game.example.com/form")
    );
    let refused = form(&[("url", "javascript:alert('<b>')"), ("key", API_KEY)])
        .await
        .expect("form");
    assert_eq!(refused.status(), 400);
    let html = refused.text().await.expect("html");
    assert!(html.contains("id=\"error\""), "{html}");
    assert!(
        html.contains("javascript:alert(&#39;&lt;b&gt;&#39;)"),
        "escaped: {html}"
    );
    assert!(!html.contains("<b>"));
    let anonymous = form(&[("url", "https://game.example.com/anon")])
        .await
        .expect("form");
    assert_eq!(anonymous.status(), 401);

    let qr = get(&server, &format!("/{code}/qr.svg")).await;
    assert_eq!(qr.status(), 200);
    assert_eq!(qr.headers()["content-type"], "image/svg+xml");
    let svg = qr.text().await.expect("svg");
    assert!(svg.contains("<svg") && svg.contains("</svg>"));
    let missing = get(&server, "/nosuchcode/qr.svg").await;
    assert_eq!(missing.status(), 404);
}

async fn app_association_documents(backend: Backend) {
    let db = Database::new(backend).await;
    let server = TestServer::start(links_config(&db)).await;
    for path in [
        "/apple-app-site-association",
        "/.well-known/apple-app-site-association",
        "/.well-known/assetlinks.json",
    ] {
        let (status, _) = status_and_json(get(&server, path).await).await;
        assert_eq!(status, 404, "{path} unconfigured");
    }
    server.stop().await.expect("stop");

    let mut config = links_config(&db);
    config.links.apple_app_ids = vec!["ABCDE12345.com.example.game".into()];
    config.links.android_package = "com.example.game".into();
    let fingerprint = vec!["AB"; 32].join(":");
    config.links.android_sha256_fingerprints = vec![fingerprint.clone()];
    let server = TestServer::start(config).await;
    for path in [
        "/apple-app-site-association",
        "/.well-known/apple-app-site-association",
    ] {
        let response = get(&server, path).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "application/json");
        let body: Value = response.json().await.expect("JSON");
        let details = &body["applinks"]["details"];
        assert_eq!(details[0]["appIDs"], json!(["ABCDE12345.com.example.game"]));
        assert_eq!(details[0]["components"], json!([{ "/": "/*" }]));
        assert_eq!(details[1]["appID"], "ABCDE12345.com.example.game");
        assert_eq!(body["applinks"]["apps"], json!([]));
    }
    let response = get(&server, "/.well-known/assetlinks.json").await;
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(
        body,
        json!([{
            "relation": ["delegate_permission/common.handle_all_urls"],
            "target": {
                "namespace": "android_app",
                "package_name": "com.example.game",
                "sha256_cert_fingerprints": [fingerprint]
            }
        }])
    );
}

#[test]
fn bad_links_settings_are_named() {
    let bad = |edit: fn(&mut Config)| {
        let mut config = Config::default();
        edit(&mut config);
        config.validate().expect_err("refused")
    };
    assert!(bad(|c| c.links.listen = "nope".into()).contains("links.listen"));
    assert!(
        bad(|c| c.links.public_url = "https://go.example.com/x".into())
            .contains("links.public_url")
    );
    assert!(bad(|c| c.links.max_url_bytes = 100_000).contains("links.max_url_bytes"));
    assert!(
        bad(|c| c.links.apple_app_ids = vec!["com.example".into()]).contains("links.apple_app_ids")
    );
    assert!(bad(|c| {
        c.links.android_package = "com.example".into();
        c.links.android_sha256_fingerprints = vec!["AB:CD".into()];
    })
    .contains("fingerprints"));
    assert!(bad(|c| c.links.android_package = "com.example".into()).contains("go together"));
    assert!(
        bad(|c| c.links.blocked_domains = vec!["https://x.example".into()])
            .contains("blocked_domains")
    );
}
