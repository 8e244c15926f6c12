//! The autoscaler's HTTP endpoint through `serve`: the desired replicas as a Prometheus metric,
//! and the events API (token required, bad events refused with the reason).

use std::time::Duration;

use muster_autoscaler::run::{serve, RunSettings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// A demand source that never gives demand: every read is answered 503 and closed. Each read
/// is announced on the returned channel, so a test can wait for the autoscaler to have tried.
async fn unreadable_source() -> (String, mpsc::UnboundedReceiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/metrics", listener.local_addr().expect("addr"));
    let (read_tx, reads) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = [0u8; 2048];
            let _ = stream.read(&mut request).await;
            let _ = stream
                .write_all(
                    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            drop(stream);
            let _ = read_tx.send(());
        }
    });
    (url, reads)
}

/// The autoscaler's HTTP endpoint (its base URL), reading demand from a source that never
/// answers with any; the channel says each time it tried.
async fn start(api_token: Option<&str>) -> (String, mpsc::UnboundedReceiver<()>) {
    let grpc = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let http = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", http.local_addr().expect("addr"));
    // Demand cannot be read, and the replicas hold.
    let (source, reads) = unreadable_source().await;
    let settings = RunSettings {
        units_per_replica: 100.0,
        target: 0.5,
        min_replicas: 2,
        max_replicas: 10,
        ..RunSettings::new(vec![source])
    };
    tokio::spawn(serve(
        settings,
        grpc,
        http,
        api_token.map(str::to_owned),
        std::future::pending(),
    ));
    (base, reads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_the_events_api() {
    let (base, mut reads) = start(Some("secret-token")).await;
    let http = reqwest::Client::new();
    // The run loop reads its sources one tick after another, so its second read means the
    // first failed one has been dealt with (the replicas held, the source marked down).
    for read in ["first", "second"] {
        tokio::time::timeout(Duration::from_secs(10), reads.recv())
            .await
            .unwrap_or_else(|_| panic!("the autoscaler never made its {read} read of demand"))
            .expect("the source is still serving");
    }
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
    let (base, _reads) = start(None).await;
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
