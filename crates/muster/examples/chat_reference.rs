//! The reference for chat fanout (bench/chat-redis.sh): Redis pub/sub doing what bench/chat.sh
//! asks of Muster — PLAYERS connections in CHANNELS channels, each connection subscribed to its
//! channel and publishing into it, every message delivered to every subscriber (its sender
//! included, as Muster delivers a channel message to its sender too).
//!
//! The load is bench/chat.sh's: players connect over RAMP_S seconds (RESP3, so one connection
//! both subscribes and publishes), wait WAIT_S, then each publishes RATE messages a second on
//! average (intervals uniform in [0.5, 1.5] / RATE s, 10–100 bytes, the intended send time in
//! the message) for CHAT_S seconds; 3 s more collect the last deliveries. The window is the
//! chat's seconds less one at each edge: sent/s and delivered/s count the messages whose
//! intended send time falls in it, and the delivery latency runs from that time to the
//! subscriber's read. With SERVER_PID, the server's CPU (user and system, from /proc) over the
//! window gives its µs per delivery.
//!
//! Prints one JSON line. The client runs on THREADS tokio workers (bench/chat.sh's 2 swarm
//! workers), so the two benches load the machine alike.
//!
//! Usage: cargo run --release -p muster --example chat_reference --
//!        ADDR [PLAYERS=10000] [CHANNELS=2000] [RATE=1.5] [RAMP_S=8] [WAIT_S=10] [CHAT_S=20]
//!        [SERVER_PID] [THREADS=2]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use hdrhistogram::Histogram;
use redis_protocol::codec::Resp3;
use redis_protocol::resp3::types::{BytesFrame, RespVersion};
use tokio::net::TcpStream;
use tokio_util::codec::{FramedRead, FramedWrite};

/// Latency shards: readers record into the shard of their player, so two threads rarely meet.
const SHARDS: usize = 16;

struct Run {
    start: Instant,
    /// When every player starts publishing (start + RAMP_S + WAIT_S).
    chat_start: Instant,
    chat: Duration,
    rate: f64,
    sent_in_window: AtomicU64,
    delivered_in_window: AtomicU64,
    delivered: AtomicU64,
    errors: AtomicU64,
    latency_us: Vec<Mutex<Histogram<u64>>>,
}

impl Run {
    /// Whether a message meant to leave at `sent_us` (µs since start) is in the window.
    fn in_window(&self, sent_us: u64) -> bool {
        let from = self.chat_start - self.start + Duration::from_secs(1);
        let to = self.chat_start - self.start + self.chat - Duration::from_secs(1);
        (from.as_micros() as u64..to.as_micros() as u64).contains(&sent_us)
    }
}

fn command(parts: &[&[u8]]) -> BytesFrame {
    BytesFrame::Array {
        data: parts
            .iter()
            .map(|part| BytesFrame::BlobString {
                data: Bytes::copy_from_slice(part),
                attributes: None,
            })
            .collect(),
        attributes: None,
    }
}

/// One player: connect, subscribe, then publish and read until the run ends.
async fn player(addr: String, index: usize, channels: usize, run: Arc<Run>) -> anyhow_free::Result {
    let stream = TcpStream::connect(&addr).await?;
    stream.set_nodelay(true)?;
    let (read, write) = stream.into_split();
    let mut reads = FramedRead::new(read, Resp3::default());
    let mut writes = FramedWrite::new(write, Resp3::default());
    let channel = format!("bench-{}", index % channels);
    writes
        .send(BytesFrame::Hello {
            version: RespVersion::RESP3,
            auth: None,
            setname: None,
        })
        .await?;
    writes
        .send(command(&[b"SUBSCRIBE", channel.as_bytes()]))
        .await?;
    // The HELLO map, then the subscription's confirmation.
    for _ in 0..2 {
        reads.next().await.ok_or("closed while subscribing")??;
    }

    let shard = &run.latency_us[index % SHARDS];
    let reader = {
        let run = run.clone();
        async move {
            while let Some(frame) = reads.next().await {
                let Ok(BytesFrame::Push { data, .. }) = frame else {
                    continue;
                };
                // ["message", channel, payload]
                let Some(BytesFrame::BlobString { data: payload, .. }) = data.get(2) else {
                    continue;
                };
                let Some(sent_us) = payload
                    .split(|byte| *byte == b':')
                    .next()
                    .and_then(|digits| std::str::from_utf8(digits).ok()?.parse::<u64>().ok())
                else {
                    continue;
                };
                run.delivered.fetch_add(1, Ordering::Relaxed);
                if run.in_window(sent_us) {
                    run.delivered_in_window.fetch_add(1, Ordering::Relaxed);
                    let now_us = run.start.elapsed().as_micros() as u64;
                    let _ = shard.lock().record(now_us.saturating_sub(sent_us).max(1));
                }
            }
        }
    };
    let writer = async {
        // Each player's first message falls anywhere in its first interval.
        let mut next = run.chat_start + Duration::from_secs_f64(rand::random::<f64>() / run.rate);
        let end = run.chat_start + run.chat;
        while next < end {
            tokio::time::sleep_until(next.into()).await;
            let sent_us = (next - run.start).as_micros() as u64;
            let mut payload = format!("{sent_us}:").into_bytes();
            payload.resize(rand::random_range(10..=100usize).max(payload.len()), b'x');
            writes
                .send(command(&[b"PUBLISH", channel.as_bytes(), &payload]))
                .await?;
            if run.in_window(sent_us) {
                run.sent_in_window.fetch_add(1, Ordering::Relaxed);
            }
            next += Duration::from_secs_f64((0.5 + rand::random::<f64>()) / run.rate);
        }
        Ok::<_, anyhow_free::Error>(())
    };
    // The reader ends with the connection; the run's end drops both.
    tokio::select! {
        () = reader => Ok(()),
        written = writer => {
            written?;
            std::future::pending().await
        }
    }
}

/// A boxed error, so this example needs no error crate.
mod anyhow_free {
    pub type Error = Box<dyn std::error::Error + Send + Sync>;
    pub type Result = std::result::Result<(), Error>;
}

/// A process's user and system CPU, in seconds (`/proc/PID/stat`, fields 14 and 15).
fn process_cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: the fields count from the closing parenthesis.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks_per_s())
}

/// The unit of /proc's CPU times (`getconf CLK_TCK`; 100 where it cannot be asked).
fn clock_ticks_per_s() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

fn percentile_ms(histogram: &Histogram<u64>, quantile: f64) -> f64 {
    histogram.value_at_quantile(quantile) as f64 / 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |index: usize, default: &str| -> String {
        args.get(index)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    };
    let addr = arg(0, "127.0.0.1:6379");
    let players: usize = arg(1, "10000").parse().expect("PLAYERS");
    let channels: usize = arg(2, "2000").parse().expect("CHANNELS");
    let rate: f64 = arg(3, "1.5").parse().expect("RATE");
    let ramp_s: f64 = arg(4, "8").parse().expect("RAMP_S");
    let wait_s: f64 = arg(5, "10").parse().expect("WAIT_S");
    let chat_s: f64 = arg(6, "20").parse().expect("CHAT_S");
    let server_pid: Option<u32> = args.get(7).and_then(|pid| pid.parse().ok());
    let threads: usize = arg(8, "2").parse().expect("THREADS");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime");
    let start = Instant::now();
    let run = Arc::new(Run {
        start,
        chat_start: start + Duration::from_secs_f64(ramp_s + wait_s),
        chat: Duration::from_secs_f64(chat_s),
        rate,
        sent_in_window: AtomicU64::new(0),
        delivered_in_window: AtomicU64::new(0),
        delivered: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        latency_us: (0..SHARDS)
            .map(|_| Mutex::new(Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds")))
            .collect(),
    });
    let window_s = chat_s - 2.0;
    let server_cpu = runtime.block_on(async {
        for index in 0..players {
            // Connections spread evenly over the ramp.
            let at = start + Duration::from_secs_f64(ramp_s * index as f64 / players as f64);
            tokio::time::sleep_until(at.into()).await;
            let (addr, run) = (addr.clone(), run.clone());
            tokio::spawn(async move {
                if let Err(error) = player(addr, index, channels, run.clone()).await {
                    if run.errors.fetch_add(1, Ordering::Relaxed) == 0 {
                        eprintln!("player {index}: {error}");
                    }
                }
            });
        }
        let window_start = run.chat_start + Duration::from_secs(1);
        tokio::time::sleep_until(window_start.into()).await;
        let before = server_pid.and_then(process_cpu_s);
        tokio::time::sleep(Duration::from_secs_f64(window_s)).await;
        let after = server_pid.and_then(process_cpu_s);
        // The rest of the chat, and 3 s for the last deliveries.
        tokio::time::sleep(Duration::from_secs(4)).await;
        before.zip(after).map(|(before, after)| after - before)
    });
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
    for shard in &run.latency_us {
        latency.add(&*shard.lock()).expect("same bounds");
    }
    let delivered_per_s = run.delivered_in_window.load(Ordering::Relaxed) as f64 / window_s;
    let server_cpu_per_s = server_cpu.map(|cpu| cpu / window_s);
    let json = serde_json::json!({
        "reference": "redis-pubsub",
        "ratePerSocket": rate,
        "players": players,
        "channels": channels,
        "errors": run.errors.load(Ordering::Relaxed),
        "windowS": window_s,
        "sentPerS": (run.sent_in_window.load(Ordering::Relaxed) as f64 / window_s).round(),
        "deliveredPerS": delivered_per_s.round(),
        "delivered": run.delivered.load(Ordering::Relaxed),
        "deliveryP50Ms": percentile_ms(&latency, 0.5),
        "deliveryP99Ms": percentile_ms(&latency, 0.99),
        "deliveryP999Ms": percentile_ms(&latency, 0.999),
        "deliveryMaxMs": latency.max() as f64 / 1000.0,
        "serverCpuPerS": server_cpu_per_s.map(|cpu| (cpu * 1000.0).round() / 1000.0),
        "serverCpuUsPerDelivery": server_cpu_per_s
            .filter(|_| delivered_per_s > 0.0)
            .map(|cpu| (cpu * 1e6 / delivered_per_s * 100.0).round() / 100.0),
    });
    println!("{json}");
    // Open connections and their tasks end with the process.
    std::process::exit(0);
}
