//! The KEDA external scaler over real gRPC, driven by a client generated from KEDA's published
//! proto, with `run` reading demand from a node's `/metrics` over HTTP: the metric spec, the
//! push stream, the desired replicas following demand within a second or two, and a source that
//! stops answering (the last decision holds).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use muster_autoscaler::calendar::Calendar;
use muster_autoscaler::keda::proto::external_scaler_client::ExternalScalerClient;
use muster_autoscaler::keda::proto::{GetMetricsRequest, ScaledObjectRef};
use muster_autoscaler::keda::{Desired, Scaler, METRIC};
use muster_autoscaler::run::{channels, run, RunSettings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// A node's `/metrics`: `muster_sockets_open` at `sockets`; 503 while `down`. Each read it
/// has answered is announced on the returned channel (`true` when it answered 503), so a test
/// can wait for the autoscaler to have read it.
async fn fake_node(
    sockets: Arc<AtomicU64>,
    down: Arc<AtomicBool>,
) -> (String, mpsc::UnboundedReceiver<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (read_tx, reads) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let sockets = sockets.clone();
            let down = down.clone();
            let read_tx = read_tx.clone();
            tokio::spawn(async move {
                let mut buffer = [0u8; 2048];
                let _ = stream.read(&mut buffer).await;
                let was_down = down.load(Ordering::SeqCst);
                let response = if was_down {
                    "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned()
                } else {
                    let body = format!(
                        "# TYPE muster_sockets_open gauge\nmuster_sockets_open {}\n",
                        sockets.load(Ordering::SeqCst)
                    );
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                let _ = stream.write_all(response.as_bytes()).await;
                drop(stream);
                let _ = read_tx.send(was_down);
            });
        }
    });
    (format!("http://{addr}/metrics"), reads)
}

fn object() -> ScaledObjectRef {
    ScaledObjectRef {
        name: "muster".into(),
        namespace: "games".into(),
        scaler_metadata: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_sees_replicas_follow_demand_and_hold_when_the_source_fails() {
    let sockets = Arc::new(AtomicU64::new(5_000));
    let down = Arc::new(AtomicBool::new(false));
    let (source, mut reads) = fake_node(sockets.clone(), down.clone()).await;
    let (outputs, shared) = channels(Desired { replicas: 1 }, &Calendar::default(), None);
    let watching = shared.desired.clone();
    let grpc = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let grpc_addr = grpc.local_addr().expect("addr");
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(Scaler::new(watching).service())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(grpc)),
    );
    let settings = RunSettings {
        max_replicas: 20,
        ..RunSettings::new(vec![source])
    };
    tokio::spawn(run(settings, outputs, std::future::pending()));

    let mut client = ExternalScalerClient::connect(format!("http://{grpc_addr}"))
        .await
        .expect("connect");
    let spec = client
        .get_metric_spec(object())
        .await
        .expect("spec")
        .into_inner();
    assert_eq!(spec.metric_specs.len(), 1);
    assert_eq!(spec.metric_specs[0].metric_name, METRIC);
    assert_eq!(spec.metric_specs[0].target_size_float, 1.0);
    assert!(
        client
            .is_active(object())
            .await
            .expect("active")
            .into_inner()
            .result
    );
    let mut pushes = client
        .stream_is_active(object())
        .await
        .expect("stream")
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(2), pushes.message())
        .await
        .expect("the current state at once")
        .expect("message")
        .expect("some");
    assert!(first.result);

    let replicas = |mut client: ExternalScalerClient<tonic::transport::Channel>| async move {
        client
            .get_metrics(GetMetricsRequest {
                scaled_object_ref: Some(object()),
                metric_name: METRIC.into(),
            })
            .await
            .expect("metrics")
            .into_inner()
            .metric_values[0]
            .metric_value_float
    };
    assert_eq!(replicas(client.clone()).await, 1.0);

    // A spike: 50,000 players at 70 % of 18,000 a replica → 4 replicas.
    let breach = Instant::now();
    sockets.store(50_000, Ordering::SeqCst);
    let pushed = tokio::time::timeout(Duration::from_secs(5), pushes.message())
        .await
        .expect("a push when the decision changes")
        .expect("message")
        .expect("some");
    let reaction = breach.elapsed();
    assert!(pushed.result);
    assert_eq!(replicas(client.clone()).await, 4.0);
    // The figure is bench/autoscale.sh's; here only that it came.
    println!("reaction from breach to push: {reaction:?}");

    // The source fails: not zero demand; the last decision holds. The run loop reads once a
    // tick, one read after another, so by the third read answered 503 it has dealt with two
    // failed ones.
    down.store(true, Ordering::SeqCst);
    let mut failed_reads = 0;
    while failed_reads < 3 {
        let was_down = tokio::time::timeout(Duration::from_secs(10), reads.recv())
            .await
            .unwrap_or_else(|_| {
                panic!("the autoscaler stopped reading its source ({failed_reads} failed reads)")
            })
            .expect("the source is still serving");
        failed_reads += u32::from(was_down);
    }
    assert!(
        !shared.source_up.load(Ordering::Relaxed),
        "the failed reads were not noticed"
    );
    assert_eq!(replicas(client.clone()).await, 4.0);

    // Unknown metric names are refused clearly.
    let refused = client
        .get_metrics(GetMetricsRequest {
            scaled_object_ref: Some(object()),
            metric_name: "cpu".into(),
        })
        .await
        .expect_err("unknown metric");
    assert_eq!(refused.code(), tonic::Code::NotFound);
    assert!(refused.message().contains(METRIC));
}
