//! Run with `cargo run --release -p muster-autoscaler --example reaction` (`bench/autoscale.sh`
//! runs it; `HPA_SYNC_PERIOD_S=3` shortens the HPA's period for a quick look).
//!
//! How long from a breach in demand to new replicas, as a Kubernetes cluster sees it. Each trial
//! runs the real pieces over real sockets on 127.0.0.1 — a node's `/metrics` over HTTP, the run
//! loop, KEDA's external scaler over gRPC — and, in place of KEDA and the HPA, a client that acts
//! as they do ([`muster_autoscaler::cluster`]): it holds the `StreamIsActive` stream open and
//! applies each push as KEDA does (with replicas above 0, a push only records the last active
//! time), and every HPA sync period (15 s) it reads `GetMetrics` over gRPC and applies the HPA's
//! arithmetic (10 % tolerance, +4 pods or +100 % per 15 s).
//!
//! A trial: 20,000 sockets (2 replicas at 18,000 a replica and a 70 % target), then 110,000 (9
//! replicas). The 20 trials run side by side, each with the breach at a different point of the
//! loop's sampling second and of the HPA's sync period, so the figures cover both phases. Prints
//! JSON as its last line (the lines before are the run loops' decision logs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use muster_autoscaler::calendar::Calendar;
use muster_autoscaler::cluster::{on_push, Hpa, HpaSettings, PushEffect};
use muster_autoscaler::keda::proto::external_scaler_client::ExternalScalerClient;
use muster_autoscaler::keda::proto::{GetMetricsRequest, ScaledObjectRef};
use muster_autoscaler::keda::{Desired, Scaler, METRIC};
use muster_autoscaler::run::{channels, run, RunSettings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

const TRIALS: usize = 20;
const BEFORE: u64 = 20_000;
const AFTER: u64 = 110_000;
const MIN_REPLICAS: u32 = 2;
/// The replicas the policy asks for at `AFTER`: ceil(110,000 / 0.7 / 18,000).
const WANTED: u32 = 9;

/// What one trial measured, in seconds from the breach.
struct Trial {
    /// The scaler's answer changed (the push on `StreamIsActive` that announces it arrived).
    published_s: f64,
    /// The HPA first set more replicas than before.
    first_replica_s: f64,
    /// The HPA reached the replicas the policy asked for.
    all_replicas_s: f64,
    /// The same with the ScaledObject's scale-up policy widened (+1,000 % per period).
    all_replicas_wide_s: f64,
    /// Pushes that KEDA would have acted on (activation from 0): none are expected.
    pushes_acted_on: usize,
    pushes: usize,
}

/// A node's `/metrics`, answering `muster_sockets_open` at `sockets`.
async fn node(sockets: Arc<AtomicU64>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/metrics", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let value = sockets.load(Ordering::SeqCst);
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
    url
}

/// One trial: the breach `breach_after` from the start; the HPA's first sync `hpa_phase` from
/// the start, then every `sync`.
async fn trial(breach_after: Duration, hpa_phase: Duration, sync: Duration) -> Trial {
    let sockets = Arc::new(AtomicU64::new(BEFORE));
    let source = node(sockets.clone()).await;
    let (outputs, shared) = channels(
        Desired {
            replicas: u64::from(MIN_REPLICAS),
        },
        &Calendar::default(),
        None,
    );
    let grpc = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let grpc_addr = grpc.local_addr().expect("addr");
    let grpc_task = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(Scaler::new(shared.desired.clone()).service())
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(grpc)),
    );
    let settings = RunSettings {
        min_replicas: u64::from(MIN_REPLICAS),
        max_replicas: 50,
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
    let start = Instant::now();
    let breach_at = start + breach_after;
    // The replicas as the HPA last set them, for the push handler to read.
    let (replicas_tx, replicas_rx) = watch::channel(MIN_REPLICAS);

    // KEDA's push handler: every message on StreamIsActive, applied as KEDA applies it.
    let mut pushes = client
        .stream_is_active(object.clone())
        .await
        .expect("stream")
        .into_inner();
    let push_task = tokio::spawn(async move {
        let (mut count, mut acted, mut first_after_breach) = (0, 0, None);
        while let Ok(Some(message)) = pushes.message().await {
            let now = Instant::now();
            count += 1;
            let replicas = *replicas_rx.borrow();
            if let PushEffect::Activated(_) = on_push(message.result, replicas, MIN_REPLICAS) {
                acted += 1;
            }
            if now >= breach_at && first_after_breach.is_none() {
                first_after_breach = Some(now - breach_at);
            }
        }
        (count, acted, first_after_breach)
    });

    // The breach.
    let breach = tokio::spawn({
        let sockets = sockets.clone();
        async move {
            tokio::time::sleep_until(breach_at.into()).await;
            sockets.store(AFTER, Ordering::SeqCst);
        }
    });

    // The HPA: a sync every period from its phase, each reading GetMetrics over gRPC.
    let mut hpa = Hpa::new(
        HpaSettings {
            sync_period_s: sync.as_secs_f64(),
            scale_up_period_s: sync.as_secs_f64(),
            ..HpaSettings::new(MIN_REPLICAS, 50)
        },
        MIN_REPLICAS,
    );
    // Beside it, reading the same answers at the same instants, an HPA whose ScaledObject widens
    // the scale-up policy (`behavior.scaleUp.policies: [{type: Percent, value: 1000,
    // periodSeconds: 15}]`).
    let mut wide = Hpa::new(
        HpaSettings {
            scale_up_percent: 1_000.0,
            ..hpa.settings().clone()
        },
        MIN_REPLICAS,
    );
    let mut all_replicas_wide = None;
    let mut next_sync = start + hpa_phase;
    // The HPA's arithmetic runs on its nominal schedule (exactly one period apart): its rate
    // limit looks back exactly one period, so wall-clock jitter of a millisecond would decide
    // whether the last scale-up still counts. In a cluster that jitter is real (see the docs).
    let mut sync_index = 0_u32;
    let (mut first_replica, mut all_replicas) = (None, None);
    let give_up = breach_at + 4 * sync + Duration::from_secs(5);
    while (all_replicas.is_none() || all_replicas_wide.is_none()) && next_sync < give_up {
        tokio::time::sleep_until(next_sync.into()).await;
        let metric = client
            .get_metrics(GetMetricsRequest {
                scaled_object_ref: Some(object.clone()),
                metric_name: METRIC.into(),
            })
            .await
            .expect("metrics")
            .into_inner()
            .metric_values[0]
            .metric_value_float;
        let now = Instant::now();
        let nominal_s = hpa_phase.as_secs_f64() + f64::from(sync_index) * sync.as_secs_f64();
        sync_index += 1;
        let replicas = hpa.sync(nominal_s, metric);
        replicas_tx.send_replace(replicas);
        let wide_replicas = wide.sync(nominal_s, metric);
        if now >= breach_at && wide_replicas >= WANTED {
            all_replicas_wide.get_or_insert(now - breach_at);
        }
        if now >= breach_at {
            if replicas > MIN_REPLICAS && first_replica.is_none() {
                first_replica = Some(now - breach_at);
            }
            if replicas >= WANTED {
                all_replicas = Some(now - breach_at);
            }
        }
        next_sync += sync;
    }
    let _ = breach.await;
    let _ = stop.send(());
    let _ = run_task.await;
    grpc_task.abort();
    drop(client);
    let (pushes, pushes_acted_on, published) = push_task.await.expect("push handler");
    Trial {
        published_s: published.expect("the scaler published").as_secs_f64(),
        first_replica_s: first_replica.expect("a new replica").as_secs_f64(),
        all_replicas_s: all_replicas.expect("all replicas").as_secs_f64(),
        all_replicas_wide_s: all_replicas_wide
            .expect("all replicas, wide policy")
            .as_secs_f64(),
        pushes_acted_on,
        pushes,
    }
}

/// Median (nearest rank) and max of `values`.
fn spread(mut values: Vec<f64>, scale: f64) -> serde_json::Value {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize] * scale;
    let round = |v: f64| (v * 10.0).round() / 10.0;
    serde_json::json!({ "p50": round(at(0.5)), "max": round(at(1.0)), "min": round(at(0.0)) })
}

#[tokio::main]
async fn main() {
    let sync_s: f64 = std::env::var("HPA_SYNC_PERIOD_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|v: &f64| *v > 0.0)
        .unwrap_or(15.0);
    let sync = Duration::from_secs_f64(sync_s);
    let started = Instant::now();
    let trials: Vec<_> = (0..TRIALS)
        .map(|i| {
            // The breach at a different point of the sampling second in each trial (evenly), and
            // of the HPA's period (a golden-ratio sequence: evenly spread, unrelated to the first).
            let breach_after = Duration::from_millis(3_000 + (i as u64 * 1_000) / TRIALS as u64);
            let phase = sync.mul_f64((0.5 + i as f64 * 0.618_033_988_75).fract());
            tokio::spawn(trial(breach_after, phase, sync))
        })
        .collect();
    let mut done = Vec::new();
    for t in trials {
        done.push(t.await.expect("trial"));
    }
    let pushes: usize = done.iter().map(|t| t.pushes).sum();
    let acted: usize = done.iter().map(|t| t.pushes_acted_on).sum();
    println!(
        "{}",
        serde_json::json!({
            "trials": TRIALS,
            "model": "KEDA external scaler (external-push) + HPA defaults: sync every period, 10 % tolerance, +4 pods or +100 % per period; GetMetrics read live over gRPC",
            "hpa_sync_period_s": sync_s,
            "replicas": { "from": MIN_REPLICAS, "to": WANTED },
            "scaler_published_ms": spread(done.iter().map(|t| t.published_s).collect(), 1000.0),
            "breach_to_first_new_replica_s": spread(done.iter().map(|t| t.first_replica_s).collect(), 1.0),
            "breach_to_all_replicas_s": spread(done.iter().map(|t| t.all_replicas_s).collect(), 1.0),
            "breach_to_all_replicas_s_with_wide_scale_up_policy": spread(done.iter().map(|t| t.all_replicas_wide_s).collect(), 1.0),
            "stream_is_active_pushes": pushes,
            "pushes_keda_acts_on": acted,
            "wall_s": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        })
    );
}
