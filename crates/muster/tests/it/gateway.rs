//! `/graphql` on a real server, against a mock origin: a player's query joining origin data and
//! the player's own account and wallet, the cache status extension, the API key, refusals
//! (no or bad credentials, bad JSON, bad queries), and the query page (which loads nothing from
//! anywhere else).

use crate::support;

use std::time::Duration;

use muster_gateway::mock::{MockOrigin, MockSettings};
use serde_json::{json, Value};
use support::{assert_error, status_and_json, Backend, Database, TestServer};

const API_KEY: &str = "gateway-key-for-tests";

async fn server_with_origin() -> (TestServer, MockOrigin, Database) {
    let origin = MockOrigin::start(
        "127.0.0.1:0",
        MockSettings {
            delay: Duration::from_millis(20),
            error_rate: 0.0,
        },
    )
    .await
    .expect("mock origin");
    let db = Database::new(Backend::Sqlite).await;
    let mut config = db.config();
    config.gateway = muster_gateway::config::GatewayConfig {
        api_key: API_KEY.into(),
        ..origin.items_config()
    };
    let server = TestServer::start(config).await;
    (server, origin, db)
}

async fn post(server: &TestServer, token: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = server.http.post(server.url("/graphql")).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    status_and_json(request.send().await.expect("request")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_joins_origin_data_and_the_players_own() {
    let (server, origin, _db) = server_with_origin().await;
    let (token, _) = server.device_session("gateway-player-0001").await;
    let query = json!({ "query": r#"{ items(category: "bows") { id price } me { username wallet { currency amount } } }"# });
    let (status, body) = post(&server, Some(&token), query.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["errors"], Value::Null, "{body}");
    assert_eq!(
        body["data"]["items"][0],
        json!({ "id": "bows-1", "price": 100 })
    );
    let claims = support::claims(&token);
    assert_eq!(body["data"]["me"]["username"], claims["usn"]);
    assert!(body["data"]["me"]["wallet"].is_array(), "{body}");
    assert_eq!(body["extensions"]["cacheStatus"]["items"], "miss");
    let (_, again) = post(&server, Some(&token), query).await;
    assert_eq!(again["extensions"]["cacheStatus"]["items"], "hit");
    assert_eq!(origin.stats.calls_to("/items/bows"), 1);
    let lookups = |status: &'static str| {
        let server = &server;
        async move {
            support::metric(
                server,
                &format!("muster_gateway_lookups_total{{status=\"{status}\"}}"),
            )
            .await
        }
    };
    assert_eq!(lookups("miss").await, 1.0);
    assert_eq!(lookups("hit").await, 1.0);
    assert_eq!(
        support::metric(
            &server,
            r#"muster_gateway_origin_calls_total{origin="shop",outcome="ok"}"#
        )
        .await,
        1.0
    );
    assert!(support::metric(&server, "muster_gateway_cache_bytes").await > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_and_bad_input_are_refused_clearly() {
    let (server, origin, _db) = server_with_origin().await;
    let query = json!({ "query": r#"{ items(category: "a") { id } }"# });
    assert!(
        assert_error(&post(&server, None, query.clone()).await, 401, 16).contains("session token")
    );
    assert_error(
        &post(&server, Some("not-a-token"), query.clone()).await,
        401,
        16,
    );
    // The API key queries origin fields; `me` needs a player.
    let (status, body) = post(&server, Some(API_KEY), query).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["items"][0]["id"], "a-1");
    let (_, body) = post(&server, Some(API_KEY), json!({ "query": "{ me { id } }" })).await;
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("signed-in"),
        "{body}"
    );
    // Not JSON; not a GraphQL request; a query GraphQL refuses.
    let raw = server
        .http
        .post(server.url("/graphql"))
        .bearer_auth(API_KEY)
        .header("content-type", "application/json")
        .body("{\"query\": ")
        .send()
        .await
        .expect("request");
    assert_error(&status_and_json(raw).await, 400, 3);
    assert_error(
        &post(&server, Some(API_KEY), json!({ "querry": "{}" })).await,
        400,
        3,
    );
    let (status, body) = post(
        &server,
        Some(API_KEY),
        json!({ "query": "{ items(category: 1) { id } }" }),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("category"),
        "{body}"
    );
    assert_eq!(origin.stats.calls_to("/items/a"), 1);
}

/// The values of every `src=` and `href=` attribute in `html`, quoted or not.
fn referenced(html: &str) -> Vec<String> {
    let lower = html.to_lowercase();
    let mut found = Vec::new();
    for attribute in ["src=", "href="] {
        for (at, _) in lower.match_indices(attribute) {
            let rest = &html[at + attribute.len()..];
            let value = match rest.chars().next() {
                Some(quote @ ('"' | '\'')) => rest[1..].split(quote).next(),
                _ => rest.split([' ', '>']).next(),
            };
            found.push(value.unwrap_or_default().to_owned());
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_query_page_loads_nothing_from_elsewhere() {
    let (server, _origin, _db) = server_with_origin().await;
    let page = server
        .http
        .get(server.url("/graphql"))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), 200);
    let header = |name: &str| {
        page.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (content_type, policy) = (header("content-type"), header("content-security-policy"));
    let html = page.text().await.expect("text");
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let lower = html.to_lowercase();
    for elsewhere in ["http://", "https://", "@import", "url("] {
        assert!(!lower.contains(elsewhere), "the page holds {elsewhere:?}");
    }
    // Whatever it references is a path on this server, and is served.
    for path in referenced(&html) {
        assert!(
            path.starts_with('/') && !path.starts_with("//"),
            "{path:?} is not a path on this server"
        );
        let asset = server
            .http
            .get(server.url(&path))
            .send()
            .await
            .expect("asset");
        assert_eq!(asset.status(), 200, "{path}");
        let content_type = asset
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let expected = match path.rsplit('.').next() {
            Some("js") => "text/javascript",
            Some("css") => "text/css",
            _ => "",
        };
        assert!(content_type.starts_with(expected), "{path}: {content_type}");
    }
    // The browser is held to it too: no asset from anywhere, requests to this origin only.
    for directive in [
        "default-src 'none'",
        "connect-src 'self'",
        "base-uri 'none'",
    ] {
        assert!(policy.contains(directive), "{policy}");
    }
    assert!(
        html.contains(r#"data-endpoint="/graphql""#),
        "posts to /graphql"
    );
}

#[test]
fn references_are_found_however_quoted() {
    let html = r#"<script src="/a.js"></script><link href='/b.css'><img src=//cdn.test/c.png>"#;
    assert_eq!(
        referenced(html),
        vec!["/a.js", "//cdn.test/c.png", "/b.css"]
    );
}
