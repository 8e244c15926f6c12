//! Run with: `cargo run --release -p muster-bench -- accounts --target http://127.0.0.1:7350`
//!
//! A small, honest load client for the foundation figures (driven by `bench/*.sh`):
//! - `accounts`: device accounts created per second, closed loop, with latency percentiles;
//! - `sockets`: players that authenticate and open a realtime socket, then ping on a fixed
//!   schedule while idle; reports connect rate, ping RTT measured from the *intended* send time
//!   (a stalled server cannot hide its stalls), and the server's RSS per socket read from
//!   `/proc/PID/status`. Prints one JSON object.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use futures_util::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create device accounts as fast as the server answers.
    Accounts {
        #[arg(long, default_value = "http://127.0.0.1:7350")]
        target: String,
        #[arg(long, default_value_t = 20_000)]
        count: usize,
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Device id prefix; the sockets bench reuses it to log the same players in.
        #[arg(long, default_value = "bench-device")]
        prefix: String,
    },
    /// Authenticate and connect players, then hold them idle, pinging.
    Sockets {
        #[arg(long, default_value = "http://127.0.0.1:7350")]
        target: String,
        #[arg(long, default_value_t = 18_000)]
        count: usize,
        #[arg(long, default_value_t = 128)]
        concurrency: usize,
        #[arg(long, default_value = "bench-device")]
        prefix: String,
        /// Each socket pings this often.
        #[arg(long, default_value_t = 10_000)]
        ping_interval_ms: u64,
        /// How long to hold every socket open after the last one connected.
        #[arg(long, default_value_t = 30)]
        hold_secs: u64,
        /// The server's PID, to read its RSS.
        #[arg(long)]
        server_pid: Option<u32>,
    },
}

fn main() -> anyhow::Result<()> {
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new()?;
    let report = runtime.block_on(async {
        match cli.command {
            Command::Accounts {
                target,
                count,
                concurrency,
                prefix,
            } => accounts(target, count, concurrency, prefix).await,
            Command::Sockets {
                target,
                count,
                concurrency,
                prefix,
                ping_interval_ms,
                hold_secs,
                server_pid,
            } => {
                sockets(
                    target,
                    count,
                    concurrency,
                    prefix,
                    Duration::from_millis(ping_interval_ms),
                    hold_secs,
                    server_pid,
                )
                .await
            }
        }
    })?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000, 3).expect("valid bounds")
}

/// Percentiles in milliseconds from a histogram of microseconds.
fn percentiles(h: &Histogram<u64>) -> Value {
    let ms = |v: u64| (v as f64 / 1000.0 * 1000.0).round() / 1000.0;
    json!({
        "count": h.len(),
        "p50": ms(h.value_at_quantile(0.50)),
        "p95": ms(h.value_at_quantile(0.95)),
        "p99": ms(h.value_at_quantile(0.99)),
        "p999": ms(h.value_at_quantile(0.999)),
        "max": ms(h.max()),
    })
}

async fn authenticate(
    http: &reqwest::Client,
    target: &str,
    device_id: &str,
) -> Result<String, String> {
    let response = http
        .post(format!(
            "{target}/v2/account/authenticate/device?create=true"
        ))
        .basic_auth("defaultkey", Some(""))
        .json(&json!({ "id": device_id }))
        .send()
        .await
        .map_err(|e| format!("transport: {e}"))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("http {}", status.as_u16()));
    }
    let body: Value = response.json().await.map_err(|e| format!("body: {e}"))?;
    body["token"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "no token".into())
}

fn device_id(prefix: &str, i: usize) -> String {
    format!("{prefix}-{i:010}")
}

async fn accounts(
    target: String,
    count: usize,
    concurrency: usize,
    prefix: String,
) -> anyhow::Result<Value> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()?;
    let next = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (http, target, prefix, next, failed) = (
                http.clone(),
                target.clone(),
                prefix.clone(),
                next.clone(),
                failed.clone(),
            );
            tokio::spawn(async move {
                let mut latency = histogram();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        return latency;
                    }
                    let sent = Instant::now();
                    match authenticate(&http, &target, &device_id(&prefix, i)).await {
                        Ok(_) => {
                            let _ = latency.record(sent.elapsed().as_micros() as u64);
                        }
                        Err(_) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    let mut latency = histogram();
    for worker in workers {
        latency.add(worker.await?)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(json!({
        "bench": "accounts",
        "count": count,
        "concurrency": concurrency,
        "seconds": seconds,
        "accounts_per_sec": latency.len() as f64 / seconds,
        "failed": failed.load(Ordering::Relaxed),
        "latency_ms": percentiles(&latency),
    }))
}

fn rss_kib(pid: Option<u32>) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

struct Shared {
    connect: Mutex<Histogram<u64>>,
    rtt: Mutex<Histogram<u64>>,
    connect_failed: AtomicU64,
    hold_errors: AtomicU64,
    connected: AtomicU64,
}

async fn sockets(
    target: String,
    count: usize,
    concurrency: usize,
    prefix: String,
    ping_interval: Duration,
    hold_secs: u64,
    server_pid: Option<u32>,
) -> anyhow::Result<Value> {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()?;
    let ws_base = target.replacen("http", "ws", 1);
    let shared = Arc::new(Shared {
        connect: Mutex::new(histogram()),
        rtt: Mutex::new(histogram()),
        connect_failed: AtomicU64::new(0),
        hold_errors: AtomicU64::new(0),
        connected: AtomicU64::new(0),
    });
    let rss_before = rss_kib(server_pid);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    // Every socket stops pinging at the same deadline, set once all have connected.
    let (deadline_tx, deadline_rx) =
        tokio::sync::watch::channel::<Option<tokio::time::Instant>>(None);
    let mut players = tokio::task::JoinSet::new();
    let connectors: Vec<_> = (0..concurrency)
        .map(|_| {
            let (http, target, ws_base, prefix, next, shared) = (
                http.clone(),
                target.clone(),
                ws_base.clone(),
                prefix.clone(),
                next.clone(),
                shared.clone(),
            );
            tokio::spawn(async move {
                let mut sockets = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        return sockets;
                    }
                    let begun = Instant::now();
                    let Ok(token) = authenticate(&http, &target, &device_id(&prefix, i)).await
                    else {
                        shared.connect_failed.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let mut config = WebSocketConfig::default();
                    config.read_buffer_size = 4096;
                    config.write_buffer_size = 0;
                    let url = format!("{ws_base}/ws?token={token}&format=json");
                    match tokio_tungstenite::connect_async_with_config(url, Some(config), false)
                        .await
                    {
                        Ok((socket, _)) => {
                            let _ = shared
                                .connect
                                .lock()
                                .expect("lock")
                                .record(begun.elapsed().as_micros() as u64);
                            shared.connected.fetch_add(1, Ordering::Relaxed);
                            sockets.push(socket);
                        }
                        Err(_) => {
                            shared.connect_failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    let mut all = Vec::with_capacity(count);
    for connector in connectors {
        all.extend(connector.await?);
    }
    let connect_seconds = started.elapsed().as_secs_f64();
    let connected = all.len();
    let hold_start = tokio::time::Instant::now();
    let _ = deadline_tx.send(Some(hold_start + Duration::from_secs(hold_secs)));
    for (i, mut socket) in all.into_iter().enumerate() {
        let shared = shared.clone();
        let deadline_rx = deadline_rx.clone();
        // Spread first pings evenly over one interval.
        let offset = ping_interval.mul_f64(i as f64 / connected.max(1) as f64);
        players.spawn(async move {
            let deadline = (*deadline_rx.borrow()).unwrap_or_else(tokio::time::Instant::now);
            let mut intended = hold_start + offset;
            let mut cid = 0u64;
            while intended < deadline {
                tokio::time::sleep_until(intended).await;
                cid += 1;
                let ping = format!(r#"{{"cid":"{cid}","ping":{{}}}}"#);
                if socket.send(Message::text(ping)).await.is_err() {
                    shared.hold_errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                let expected = format!(r#""cid":"{cid}""#);
                loop {
                    match tokio::time::timeout(Duration::from_secs(10), socket.next()).await {
                        Ok(Some(Ok(Message::Text(text)))) if text.contains(&expected) => break,
                        Ok(Some(Ok(Message::Close(_)))) | Ok(None) | Ok(Some(Err(_))) | Err(_) => {
                            shared.hold_errors.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                        Ok(Some(Ok(_))) => continue,
                    }
                }
                // From the intended send time: a late send counts against the server too.
                let rtt = tokio::time::Instant::now() - intended;
                let _ = shared
                    .rtt
                    .lock()
                    .expect("lock")
                    .record(rtt.as_micros() as u64);
                intended += ping_interval;
            }
            let _ = socket.close(None).await;
        });
    }
    tokio::time::sleep(Duration::from_secs(hold_secs.min(5))).await;
    let rss_held = rss_kib(server_pid);
    while players.join_next().await.is_some() {}
    let rss_end = rss_kib(server_pid);
    let per_socket = match (rss_before, rss_held) {
        (Some(before), Some(after)) if connected > 0 => {
            Some((after.saturating_sub(before) * 1024) as f64 / connected as f64)
        }
        _ => None,
    };
    let connect = shared.connect.lock().expect("lock");
    let rtt = shared.rtt.lock().expect("lock");
    Ok(json!({
        "bench": "idle_sockets",
        "sockets_requested": count,
        "connected": connected,
        "connect_failed": shared.connect_failed.load(Ordering::Relaxed),
        "connect_seconds": connect_seconds,
        "connects_per_sec": connected as f64 / connect_seconds,
        "connect_latency_ms": percentiles(&connect),
        "hold_secs": hold_secs,
        "ping_interval_ms": ping_interval.as_millis() as u64,
        "ping_rtt_ms": percentiles(&rtt),
        "errors_during_hold": shared.hold_errors.load(Ordering::Relaxed),
        "server_rss_before_kib": rss_before,
        "server_rss_held_kib": rss_held,
        "server_rss_end_kib": rss_end,
        "server_rss_per_socket_bytes": per_socket,
    }))
}
