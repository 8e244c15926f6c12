//! The schema built from configuration, against a real (mock) origin over HTTP: answers mapped
//! to types, cache hits, single-flight under 1,000 concurrent queries, malformed answers and
//! timeouts (clear errors, nothing cached), bad queries, per-caller fields, hostile arguments,
//! and configuration mistakes named.

use std::time::Duration;

use async_graphql::Request;
use futures_util::future::join_all;
use muster_gateway::cache::Status;
use muster_gateway::config::{FieldConfig, GatewayConfig, OriginConfig};
use muster_gateway::mock::{MockOrigin, MockSettings};
use muster_gateway::schema::{CacheReport, Caller, Gateway};
use serde_json::{json, Value};

async fn mock(delay_ms: u64) -> MockOrigin {
    MockOrigin::start(
        "127.0.0.1:0",
        MockSettings {
            delay: Duration::from_millis(delay_ms),
            error_rate: 0.0,
        },
    )
    .await
    .expect("mock origin")
}

fn config(origin: &MockOrigin) -> GatewayConfig {
    // The mock's own configuration (origin `shop`, type `Item`, field `items`), with a tighter
    // depth, a short origin timeout and the fields the tests need beside `items`.
    let mut config = origin.items_config();
    config.max_depth = 3;
    config.origins[0].timeout_ms = 300;
    let items = config.fields[0].clone();
    let like_items = |name: &str, path: &str| FieldConfig {
        name: name.into(),
        path: path.into(),
        ..items.clone()
    };
    config.fields.extend([
        like_items("broken", "/malformed/{category}"),
        like_items("slow", "/slow/{category}"),
        FieldConfig {
            per_user: true,
            ..like_items("wishlist", "/wishlist/{category}")
        },
    ]);
    config
}

async fn run(gateway: &Gateway, query: &str) -> (Value, Vec<String>, Vec<(String, Status)>) {
    let report = CacheReport::default();
    let response = gateway
        .schema
        .execute(Request::new(query).data(report.clone()))
        .await;
    let errors = response.errors.iter().map(|e| e.message.clone()).collect();
    let data = response.data.into_json().expect("JSON");
    let statuses = report.0.lock().clone();
    (data, errors, statuses)
}

#[tokio::test]
async fn answers_are_mapped_and_cached() {
    let origin = mock(20).await;
    let gateway = Gateway::build(&config(&origin), reqwest::Client::new()).expect("schema");
    let query = r#"{ items(category: "swords") { id name price } }"#;
    let (data, errors, statuses) = run(&gateway, query).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        data,
        json!({ "items": [
            { "id": "swords-1", "name": "swords #1", "price": 100 },
            { "id": "swords-2", "name": "swords #2", "price": 200 },
            { "id": "swords-3", "name": "swords #3", "price": 300 },
        ]})
    );
    assert_eq!(statuses, vec![("items".to_owned(), Status::Miss)]);
    let (again, _, statuses) = run(&gateway, query).await;
    assert_eq!(again, data);
    assert_eq!(statuses, vec![("items".to_owned(), Status::Hit)]);
    assert_eq!(origin.stats.calls_to("/items/swords"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_queries_make_one_origin_call() {
    let origin = mock(150).await;
    let gateway = Gateway::build(&config(&origin), reqwest::Client::new()).expect("schema");
    let gateway = &gateway;
    let queries = (0..1000)
        .map(|_| async move { run(gateway, r#"{ items(category: "shields") { id } }"#).await });
    for (data, errors, _) in join_all(queries).await {
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(data["items"][0]["id"], "shields-1");
    }
    assert_eq!(origin.stats.calls_to("/items/shields"), 1);
    // One miss; every other query joined the one fetch (coalesced) or, on a box loaded enough
    // that the answer came back before it was first polled, found it cached (a hit).
    let stats = gateway.cache.stats();
    let count = |n: &std::sync::atomic::AtomicU64| n.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(count(&stats.misses), 1);
    assert_eq!(count(&stats.coalesced) + count(&stats.hits), 999);
    assert!(count(&stats.coalesced) > 0, "no query joined the fetch");
}

#[tokio::test]
async fn malformed_answers_and_timeouts_are_clear_errors_and_not_cached() {
    let origin = mock(40).await;
    let gateway = Gateway::build(&config(&origin), reqwest::Client::new()).expect("schema");
    for _ in 0..2 {
        let (data, errors, _) = run(&gateway, r#"{ broken(category: "x") { id } }"#).await;
        assert_eq!(data["broken"], Value::Null);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("broken") && errors[0].contains("not JSON"),
            "{errors:?}"
        );
    }
    assert_eq!(
        origin.stats.calls_to("/malformed/x"),
        2,
        "nothing cached: asked again"
    );
    // The slow path answers after 40 ms × 10; the origin's timeout is 300 ms.
    let started = std::time::Instant::now();
    let (_, errors, _) = run(&gateway, r#"{ slow(category: "y") { id } }"#).await;
    assert!(
        errors[0].contains("did not answer within 300ms"),
        "{errors:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(1000));
    assert!(gateway.cache.is_empty());
}

#[tokio::test]
async fn bad_queries_are_refused_before_any_origin_call() {
    let origin = mock(1).await;
    let gateway = Gateway::build(&config(&origin), reqwest::Client::new()).expect("schema");
    let cases = [
        ("{ items(category: \"a\") { id ", "expected selection"),
        (
            "{ items(category: \"a\") { colour } }",
            "Unknown field \"colour\"",
        ),
        ("{ nothing }", "Unknown field \"nothing\""),
        ("{ items { id } }", "category"),
        (
            "{ items(category: \"a\") { id } __schema { types { fields { type { name } } } } }",
            "too deep",
        ),
    ];
    for (query, expected) in cases {
        let (_, errors, _) = run(&gateway, query).await;
        assert!(
            errors
                .iter()
                .any(|e| e.to_lowercase().contains(&expected.to_lowercase())),
            "{query}: {errors:?}"
        );
    }
    assert_eq!(
        origin
            .stats
            .calls
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

#[tokio::test]
async fn per_caller_fields_need_a_caller_and_are_kept_apart() {
    let origin = mock(1).await;
    let gateway = Gateway::build(&config(&origin), reqwest::Client::new()).expect("schema");
    let query = r#"{ wishlist(category: "w") { id } }"#;
    let anonymous = gateway.schema.execute(Request::new(query)).await;
    assert!(anonymous.errors[0]
        .message
        .contains("needs a signed-in caller"));
    for user in ["alice", "bob", "alice"] {
        let response = gateway
            .schema
            .execute(Request::new(query).data(Caller {
                user: Some(user.into()),
            }))
            .await;
        assert!(response.errors.is_empty(), "{:?}", response.errors);
    }
    assert_eq!(origin.stats.calls_to("/wishlist/w"), 2, "one per caller");
}

#[tokio::test]
async fn arguments_cannot_change_the_origin_path() {
    let origin = mock(1).await;
    let gateway = Gateway::build(&config(&origin), reqwest::Client::new()).expect("schema");
    let (_, errors, _) = run(
        &gateway,
        r#"{ items(category: "../admin?debug=1#x") { id } }"#,
    )
    .await;
    assert!(errors.is_empty(), "{errors:?}");
    let paths: Vec<String> = origin.stats.by_path.lock().keys().cloned().collect();
    assert_eq!(
        paths,
        vec!["/items/%2E%2E%2Fadmin%3Fdebug%3D1%23x".to_owned()]
    );
}

#[test]
fn configuration_mistakes_are_named() {
    let base = GatewayConfig {
        origins: vec![OriginConfig {
            name: "shop".into(),
            base_url: "http://127.0.0.1:1".into(),
            ..OriginConfig::default()
        }],
        fields: vec![FieldConfig {
            name: "items".into(),
            origin: "shop".into(),
            path: "/items/{category}".into(),
            arguments: vec!["category".into()],
            returns: "String".into(),
            ..FieldConfig::default()
        }],
        ..GatewayConfig::default()
    };
    assert_eq!(base.validate(), Ok(()));
    let broken = |change: &dyn Fn(&mut GatewayConfig)| {
        let mut config = base.clone();
        change(&mut config);
        config.validate().expect_err("refused")
    };
    assert!(broken(&|c| c.fields[0].origin = "nope".into()).contains("no origin is named \"nope\""));
    assert!(broken(&|c| c.fields[0].arguments.clear()).contains("{category} is not an argument"));
    assert!(broken(&|c| c.fields[0].returns = "Thing".into()).contains("unknown return type"));
    assert!(broken(&|c| c.fields[0].ttl_s = 0).contains("ttl_s"));
    assert!(broken(&|c| c.fields[0].path = "/items/{category".into()).contains("unclosed"));
    assert!(broken(&|c| c.origins[0].base_url = "file:///etc/passwd".into()).contains("base_url"));
    assert!(broken(&|c| c.origins[0].concurrency = 0).contains("concurrency"));
}
