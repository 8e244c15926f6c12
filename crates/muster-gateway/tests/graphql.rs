//! The schema built from configuration, against a real (mock) origin over HTTP: answers mapped
//! to types, cache hits, single-flight under 1,000 concurrent queries, malformed answers and
//! timeouts (clear errors, nothing cached), oversized answers cut off as they stream, a hostile
//! `Retry-After`, the cache bounded by what answers hold once parsed, bad queries, per-caller
//! fields, hostile arguments, and configuration mistakes named.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_graphql::Request;
use futures_util::future::join_all;
use muster_gateway::cache::Status;
use muster_gateway::config::{FieldConfig, GatewayConfig, OriginConfig};
use muster_gateway::mock::{MockOrigin, MockSettings};
use muster_gateway::schema::{CacheReport, Caller, Gateway};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

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
        like_items("busy", "/busy/{category}"),
        FieldConfig {
            returns: "[Int]".into(),
            ..like_items("zeros", "/zeros/{category}")
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
        r#"{ items(category: "x/admin?debug=1#x") { id } }"#,
    )
    .await;
    assert!(errors.is_empty(), "{errors:?}");
    let paths: Vec<String> = origin.stats.by_path.lock().keys().cloned().collect();
    assert_eq!(paths, vec!["/items/x%2Fadmin%3Fdebug%3D1%23x".to_owned()]);
}

#[tokio::test]
async fn dot_segments_and_empty_path_arguments_are_refused_before_any_origin_call() {
    // Percent-encoded, `..` became `/items/%2E%2E`, which URL parsing normalises to `/`; `.`
    // became `/items/`, as did an empty argument.
    let origin = mock(1).await;
    let gateway = Gateway::build(&config(&origin), reqwest::Client::new()).expect("schema");
    let values = [
        "..",
        ".",
        "%2e%2e",
        "%2E%2e",
        ".%2E",
        "%2e",
        "a/..",
        "a%2f..",
        "a%2F%2E%2E",
        "../admin",
        "..%2fadmin",
        "%252e%252e",
        "..\\",
        "./",
        "",
    ];
    for value in values {
        let literal = serde_json::to_string(value).expect("a GraphQL string");
        let query = format!("{{ items(category: {literal}) {{ id }} }}");
        let (data, errors, statuses) = run(&gateway, &query).await;
        assert_eq!(data["items"], Value::Null, "{value:?}");
        assert_eq!(errors.len(), 1, "{value:?}: {errors:?}");
        assert!(
            errors[0].starts_with("items: argument category must not be")
                && errors[0].contains("change the origin's path"),
            "{value:?}: {errors:?}"
        );
        assert!(statuses.is_empty(), "{value:?}: the cache was asked");
    }
    assert_eq!(origin.stats.calls.load(Ordering::Relaxed), 0);
    assert!(gateway.cache.is_empty());
    assert_eq!(gateway.cache.stats().fetches.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_huge_retry_after_is_capped_and_the_key_keeps_working() {
    // u64::MAX seconds: added to a clock, it overflowed and panicked inside the fetch, which left
    // the key answering "the fetch task failed" until a restart.
    let origin = mock(1).await;
    let mut config = config(&origin);
    config.max_retry_after_s = 1;
    let gateway = Gateway::build(&config, reqwest::Client::new()).expect("schema");
    let query = r#"{ busy(category: "18446744073709551615") { id } }"#;
    let (_, errors, _) = run(&gateway, query).await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0] == "busy: the origin asked to slow down",
        "{errors:?}"
    );
    // The origin is paused for the cap (1 s), not for ever; then the same key is fetched again.
    let started = std::time::Instant::now();
    let (data, errors, statuses) =
        tokio::time::timeout(Duration::from_secs(10), run(&gateway, query))
            .await
            .expect("the pause is capped at max_retry_after_s");
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(data["busy"][0]["id"], "18446744073709551615-1");
    assert_eq!(statuses, vec![("busy".to_owned(), Status::Miss)]);
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the pause was kept"
    );
    assert_eq!(origin.stats.calls_to("/busy/18446744073709551615"), 2);
}

#[tokio::test]
async fn the_cache_is_bounded_by_what_answers_hold_once_parsed() {
    // `[0,0,…]` with 2,000 zeros: 4 kB of text, 64 kB parsed (a 32-byte value per zero). Thirty
    // two of them are 128 kB of text but 2 MB in memory: a 1 MiB cache keeps at most 16.
    let origin = mock(1).await;
    let mut config = config(&origin);
    config.cache_bytes = 1 << 20;
    let gateway = Gateway::build(&config, reqwest::Client::new()).expect("schema");
    for n in 2000..2032 {
        let (data, errors, _) = run(&gateway, &format!(r#"{{ zeros(category: "{n}") }}"#)).await;
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(data["zeros"].as_array().map(Vec::len), Some(n));
    }
    let (held, bytes) = (gateway.cache.len() as u64, gateway.cache.bytes());
    assert!((1..=16).contains(&held), "{held} entries held");
    assert!(bytes <= 1 << 20, "{bytes} bytes");
    assert!(
        bytes >= held * 2000 * 32,
        "{held} entries weigh {bytes} bytes"
    );
}

/// An origin that answers every GET with `body`, chunked or with its length, 64 KiB at a time,
/// and reports for each answer how many body bytes it wrote before the connection was closed on
/// it (all of them if it never was).
async fn raw_origin(body: Arc<Vec<u8>>, chunked: bool) -> (String, mpsc::UnboundedReceiver<usize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let (report, reports) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (body, report) = (body.clone(), report.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buffer = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buffer[..n]),
                    }
                }
                let framing = match chunked {
                    true => "transfer-encoding: chunked".to_owned(),
                    false => format!("content-length: {}", body.len()),
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{framing}\r\n\r\n"
                );
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let mut sent = 0;
                for piece in body.chunks(64 * 1024) {
                    let written = match chunked {
                        true => {
                            let mut framed = format!("{:x}\r\n", piece.len()).into_bytes();
                            framed.extend_from_slice(piece);
                            framed.extend_from_slice(b"\r\n");
                            socket.write_all(&framed).await
                        }
                        false => socket.write_all(piece).await,
                    };
                    if written.is_err() {
                        break;
                    }
                    sent += piece.len();
                }
                if chunked && sent == body.len() {
                    let _ = socket.write_all(b"0\r\n\r\n").await;
                }
                let _ = report.send(sent);
            });
        }
    });
    (format!("http://{addr}"), reports)
}

/// The configuration reading `raw_origin` at `base_url`: field `raw` (`[Int]`, its answer's
/// `items`), a 256 KiB answer limit and a timeout long enough to read far more.
fn raw_config(base_url: String) -> GatewayConfig {
    GatewayConfig {
        max_origin_bytes: 256 * 1024,
        origins: vec![OriginConfig {
            name: "raw".into(),
            base_url,
            timeout_ms: 60_000,
            ..OriginConfig::default()
        }],
        fields: vec![FieldConfig {
            name: "raw".into(),
            origin: "raw".into(),
            path: "/raw/{category}".into(),
            arguments: vec!["category".into()],
            returns: "[Int]".into(),
            select: "/items".into(),
            ..FieldConfig::default()
        }],
        ..GatewayConfig::default()
    }
}

#[tokio::test]
async fn answers_larger_than_the_limit_are_cut_off_while_streaming() {
    // 64 MiB of JSON (spaces, then `{"items":[0]}`) against a 256 KiB limit: read whole before
    // its size was checked, it was refused only after the origin had sent all of it.
    let mut huge = vec![b' '; 64 << 20];
    huge.extend_from_slice(br#"{"items":[0]}"#);
    let huge = Arc::new(huge);
    for chunked in [true, false] {
        let (base_url, mut reports) = raw_origin(huge.clone(), chunked).await;
        let gateway =
            Gateway::build(&raw_config(base_url), reqwest::Client::new()).expect("schema");
        let (data, errors, _) = run(&gateway, r#"{ raw(category: "big") }"#).await;
        assert_eq!(data["raw"], Value::Null);
        assert_eq!(
            errors,
            vec!["raw: the origin's answer is not what was expected: answer larger than 262144 bytes"],
            "chunked: {chunked}"
        );
        let sent = tokio::time::timeout(Duration::from_secs(30), reports.recv())
            .await
            .expect("the origin saw its answer end")
            .expect("a report");
        assert!(
            sent < huge.len() / 4,
            "chunked: {chunked}: the origin sent {sent} of {} bytes",
            huge.len()
        );
        assert!(gateway.cache.is_empty());
    }
    // An answer within the limit, chunked (no length announced), is read as ever.
    let small = Arc::new(br#"{"items":[1,2,3]}"#.to_vec());
    let (base_url, _reports) = raw_origin(small, true).await;
    let gateway = Gateway::build(&raw_config(base_url), reqwest::Client::new()).expect("schema");
    let (data, errors, _) = run(&gateway, r#"{ raw(category: "small") }"#).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(data["raw"], json!([1, 2, 3]));
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
    assert!(broken(&|c| c.max_retry_after_s = 0).contains("max_retry_after_s"));
    assert!(broken(&|c| c.max_retry_after_s = 86_401).contains("max_retry_after_s"));
    assert!(broken(&|c| c.origins[0].default_retry_after_ms = 301_000)
        .contains("default_retry_after_ms must not exceed gateway.max_retry_after_s"));
    assert!(broken(&|c| c.origins[0].per_second = 1e-300).contains("per_second"));
    assert!(broken(&|c| c.fields[0].path = "/items/../{category}".into()).contains("'.' or '..'"));
}
