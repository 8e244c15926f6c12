//! How long from a breach in demand (a node's `/metrics` showing it) to the new desired
//! replicas pushed on KEDA's `StreamIsActive` stream, over real HTTP and gRPC on 127.0.0.1.
//! Prints JSON as its last line (the lines before are the run loop's decision log);
//! `bench/autoscale.sh` runs it. The loop samples every second, so the wait for the
//! next sample (uniform over 0–1 s) is part of every figure.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use muster_autoscaler::calendar::Calendar;
use muster_autoscaler::keda::proto::external_scaler_client::ExternalScalerClient;
use muster_autoscaler::keda::proto::{GetMetricsRequest, ScaledObjectRef};
use muster_autoscaler::keda::{Desired, Scaler, METRIC};
use muster_autoscaler::run::{channels, run, RunSettings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const TRIALS: usize = 20;

/// One trial: a fresh node, run loop and gRPC server; steady demand, then a breach `offset_ms`
/// into the run; the time until the push arrives, and the replicas KEDA then reads.
async fn trial(offset_ms: u64) -> (f64, f64) {
    let sockets = Arc::new(AtomicU64::new(1_000));
    let node = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let source = format!("http://{}/metrics", node.local_addr().expect("addr"));
    let served = sockets.clone();
    let node_task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = node.accept().await {
            let value = served.load(Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = [0u8; 1024];
                let _ = stream.read(&mut buffer).await;
                let body = format!("muster_sockets_open {value}\n");
                let _ = stream
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    });
    let (outputs, shared) = channels(Desired { replicas: 1 }, &Calendar::default(), None);
    let grpc = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let grpc_addr = grpc.local_addr().expect("addr");
    let grpc_task = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(Scaler::new(shared.desired.clone()).service())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(grpc)),
    );
    let settings = RunSettings {
        units_per_replica: 1_000.0,
        target: 1.0,
        ..RunSettings::new(vec![source])
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run_task = tokio::spawn(run(settings, outputs, async {
        let _ = stopped.await;
    }));
    let mut client = ExternalScalerClient::connect(format!("http://{grpc_addr}"))
        .await
        .expect("connect");
    let object = ScaledObjectRef {
        name: "muster".into(),
        namespace: "games".into(),
        scaler_metadata: Default::default(),
    };
    let mut pushes = client
        .stream_is_active(object.clone())
        .await
        .expect("stream")
        .into_inner();
    pushes.message().await.expect("first").expect("some");
    tokio::time::sleep(Duration::from_millis(1_500 + offset_ms)).await;
    let breach = Instant::now();
    sockets.store(5_000, Ordering::SeqCst);
    pushes.message().await.expect("push").expect("some");
    let reaction = breach.elapsed().as_secs_f64() * 1000.0;
    let replicas = client
        .get_metrics(GetMetricsRequest {
            scaled_object_ref: Some(object),
            metric_name: METRIC.into(),
        })
        .await
        .expect("metrics")
        .into_inner()
        .metric_values[0]
        .metric_value_float;
    let _ = stop.send(());
    let _ = run_task.await;
    grpc_task.abort();
    node_task.abort();
    (reaction, replicas)
}

#[tokio::main]
async fn main() {
    let mut reactions = Vec::new();
    for t in 0..TRIALS {
        // Breaches at different points of the sampling second.
        let (reaction, replicas) = trial((t as u64 * 1000) / TRIALS as u64).await;
        assert!(replicas >= 5.0, "{replicas}");
        reactions.push(reaction);
    }
    reactions.sort_by(f64::total_cmp);
    let at = |q: f64| reactions[((reactions.len() - 1) as f64 * q).round() as usize];
    println!(
        "{}",
        serde_json::json!({
            "trials": TRIALS,
            "reaction_ms": {
                "min": (at(0.0) * 10.0).round() / 10.0,
                "median": (at(0.5) * 10.0).round() / 10.0,
                "max": (at(1.0) * 10.0).round() / 10.0,
            },
            "sample_period_ms": 1000,
        })
    );
}
