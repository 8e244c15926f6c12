//! The autoscaler's HTTP endpoint through `serve`: the desired replicas as a Prometheus metric,
//! and the events API (token required, bad events refused with the reason).

use std::time::Duration;

use muster_autoscaler::run::{serve, RunSettings};
use tokio::net::TcpListener;

async fn start(api_token: Option<&str>) -> String {
    let grpc = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let http = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", http.local_addr().expect("addr"));
    // Nothing listens there: demand cannot be read, and the replicas hold.
    let settings = RunSettings {
        units_per_replica: 100.0,
        target: 0.5,
        min_replicas: 2,
        max_replicas: 10,
        ..RunSettings::new(vec!["http://127.0.0.1:9/metrics".into()])
    };
    tokio::spawn(serve(
        settings,
        grpc,
        http,
        api_token.map(str::to_owned),
        std::future::pending(),
    ));
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_the_events_api() {
    let base = start(Some("secret-token")).await;
    let http = reqwest::Client::new();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let metrics = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("\nmuster_autoscaler_desired_replicas 2\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("\nmuster_autoscaler_source_up 0\n"),
        "{metrics}"
    );

    let event = serde_json::json!({
        "name": "launch", "start_s": 2_000_000_000u64, "end_s": 2_000_003_600u64, "multiplier": 4.0
    });
    let post = |body: serde_json::Value, token: Option<&str>| {
        let mut request = http.post(format!("{base}/events")).json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    assert_eq!(post(event.clone(), None).await.expect("post").status(), 401);
    assert_eq!(
        post(event.clone(), Some("wrong"))
            .await
            .expect("post")
            .status(),
        401
    );
    let bad = post(
        serde_json::json!({"name": "x", "start_s": 10, "end_s": 5, "multiplier": 2.0}),
        Some("secret-token"),
    )
    .await
    .expect("post");
    assert_eq!(bad.status(), 400);
    assert!(bad
        .text()
        .await
        .expect("text")
        .contains("end_s must be after start_s"));
    let unknown = post(
        serde_json::json!({"name": "x", "begin": 1}),
        Some("secret-token"),
    )
    .await
    .expect("post");
    assert_eq!(unknown.status(), 400);
    assert_eq!(
        post(event.clone(), Some("secret-token"))
            .await
            .expect("post")
            .status(),
        201
    );
    let listed: serde_json::Value = http
        .get(format!("{base}/events"))
        .bearer_auth("secret-token")
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(listed[0]["name"], "launch");
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_events_api_is_off() {
    let base = start(None).await;
    let http = reqwest::Client::new();
    let answer = http
        .get(format!("{base}/events"))
        .bearer_auth("anything")
        .send()
        .await
        .expect("get");
    assert_eq!(answer.status(), 403);
    assert!(answer.text().await.expect("text").contains("--api-token"));
}
