//! What the coordinator and a worker say to each other: one JSON object per line, over a local
//! worker's stdin and stdout or a remote worker's TCP connection (`swarm worker --listen`).
//!
//! The conversation, the same on both:
//! 1. coordinator `hello` (protocol version; to a remote worker, the shared token) → worker
//!    `welcome` (how many players it can hold) or `refused` (and the connection closes);
//! 2. a few `ping` → `pong`, timing the worker's clock against the coordinator's, so that one
//!    start instant can be given to workers on machines whose clocks differ;
//! 3. coordinator `start`: the worker's share and the run's start instant in the worker's clock;
//! 4. worker `started` (how late it woke for the start: the barrier's skew), then one `tick` per
//!    second (everything it measured during the second: samples, counters, failures) and a
//!    final `done` (its players' outcomes and its resources). A coordinator `stop`, or the connection ending, stops the worker
//!    early; it still closes its players' sockets and sends `done` when it can. A worker that
//!    cannot run its share (a target it cannot resolve, say) answers `refused` with the reason
//!    instead, and the coordinator reports it lost with that reason.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt as _, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _,
};

use crate::measure::stats::{Tick, WorkerResult};
use crate::run::worker::WorkerConfig;

/// Bumped whenever a message changes; a coordinator and a worker of different versions refuse
/// each other instead of misreading each other. 2: ticks carry their samples at run precision
/// and their failures by kind, and `done` no longer repeats them.
pub const PROTOCOL_VERSION: u32 = 2;
/// Longest line read before the peer has proved it holds the token.
pub const MAX_HELLO_LINE: u64 = 4 * 1024;
/// Longest line read afterwards (a scenario's text, a second's sketches).
pub const MAX_LINE: u64 = 64 * 1024 * 1024;

/// Coordinator → worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ToWorker {
    #[serde(rename_all = "camelCase")]
    Hello {
        version: u32,
        /// The shared token, for a worker that listens on the network.
        #[serde(default)]
        token: Option<String>,
    },
    /// `coordinatorUs`: the coordinator's clock when it sent the ping, echoed in the pong.
    #[serde(rename_all = "camelCase")]
    Ping {
        coordinator_us: u64,
    },
    Start(Box<WorkerConfig>),
    Stop,
}

/// Worker → coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FromWorker {
    #[serde(rename_all = "camelCase")]
    Welcome {
        version: u32,
        /// Players this worker can hold (its open-file limit, less what it keeps for itself).
        max_players: u64,
    },
    Refused {
        reason: String,
    },
    #[serde(rename_all = "camelCase")]
    Pong {
        coordinator_us: u64,
        worker_us: u64,
    },
    /// How late (µs, by the worker's clock) the worker woke for the run's start instant, and its
    /// resident memory before any player started (KiB), known even if it is lost later.
    #[serde(rename_all = "camelCase")]
    Started {
        late_us: i64,
        #[serde(default)]
        rss_baseline_kb: u64,
    },
    Tick(Tick),
    Done(WorkerResult),
}

/// Microseconds since the Unix epoch by this machine's clock, shifted by
/// `SWARM_CLOCK_OFFSET_MS` when that is set: a worker that pretends its machine's clock is off,
/// to test the start barrier against clocks that disagree.
pub fn epoch_us() -> u64 {
    static OFFSET_US: OnceLock<i64> = OnceLock::new();
    let offset = *OFFSET_US.get_or_init(|| {
        std::env::var("SWARM_CLOCK_OFFSET_MS")
            .ok()
            .and_then(|v| v.parse::<i64>().ok())
            .map_or(0, |ms| ms.saturating_mul(1000))
    });
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    now.saturating_add_signed(offset)
}

/// Why a line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("the connection closed")]
    Closed,
    #[error("a line longer than {0} bytes")]
    TooLong(u64),
    #[error("an unreadable line: {0}")]
    Garbled(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads one JSON line of at most `max` bytes and decodes it.
pub async fn read_message<T: serde::de::DeserializeOwned>(
    reader: &mut (impl AsyncBufRead + Unpin),
    max: u64,
) -> Result<T, LineError> {
    let mut line = Vec::new();
    let n = reader.take(max + 1).read_until(b'\n', &mut line).await?;
    if n == 0 {
        return Err(LineError::Closed);
    }
    if line.last() != Some(&b'\n') {
        return Err(if n as u64 > max {
            LineError::TooLong(max)
        } else {
            LineError::Closed
        });
    }
    serde_json::from_slice(&line).map_err(|e| {
        let shown: String = String::from_utf8_lossy(&line).chars().take(200).collect();
        LineError::Garbled(format!("{e}: {}", shown.trim_end()))
    })
}

/// Writes one message as a JSON line and flushes it.
pub async fn write_message<T: Serialize>(
    writer: &mut (impl AsyncWrite + Unpin),
    message: &T,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    writer.write_all(&line).await?;
    writer.flush().await
}

/// Compares a presented token with the expected one in time that does not depend on where they
/// first differ.
pub fn token_matches(presented: &str, expected: &str) -> bool {
    let (a, b) = (presented.as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn messages_round_trip_as_json_lines() {
        let mut buf = Vec::new();
        write_message(&mut buf, &ToWorker::Ping { coordinator_us: 7 })
            .await
            .unwrap();
        write_message(&mut buf, &ToWorker::Stop).await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&buf),
            "{\"type\":\"ping\",\"coordinatorUs\":7}\n{\"type\":\"stop\"}\n"
        );
        let mut reader = tokio::io::BufReader::new(&buf[..]);
        let first: ToWorker = read_message(&mut reader, MAX_LINE).await.unwrap();
        assert!(matches!(first, ToWorker::Ping { coordinator_us: 7 }));
        let second: ToWorker = read_message(&mut reader, MAX_LINE).await.unwrap();
        assert!(matches!(second, ToWorker::Stop));
        let end = read_message::<ToWorker>(&mut reader, MAX_LINE).await;
        assert!(matches!(end, Err(LineError::Closed)));
    }

    #[tokio::test]
    async fn long_garbled_and_cut_lines_are_refused() {
        let long = format!(
            "{{\"type\":\"hello\",\"token\":\"{}\"}}\n",
            "x".repeat(5000)
        );
        let mut reader = tokio::io::BufReader::new(long.as_bytes());
        let r = read_message::<ToWorker>(&mut reader, MAX_HELLO_LINE).await;
        assert!(matches!(r, Err(LineError::TooLong(_))), "{r:?}");

        let mut reader = tokio::io::BufReader::new(&b"{\"type\":\"dance\"}\n"[..]);
        let r = read_message::<ToWorker>(&mut reader, MAX_LINE).await;
        assert!(
            matches!(r, Err(LineError::Garbled(ref m)) if m.contains("dance")),
            "{r:?}"
        );

        let mut reader = tokio::io::BufReader::new(&b"{\"type\":\"st"[..]);
        let r = read_message::<ToWorker>(&mut reader, MAX_LINE).await;
        assert!(matches!(r, Err(LineError::Closed)), "{r:?}");
    }

    /// Merge exactness: sixteen workers' seconds, each sent as the protocol's JSON line and
    /// merged by the coordinator, give exactly the histogram one recorder of every sample gives
    /// (counts equal, every percentile equal), and that histogram is within its 1 % precision of
    /// the exact sorted samples.
    #[test]
    fn sixteen_workers_merge_exactly_like_one_histogram() {
        use crate::measure::sketch::{Precision, Sketch};
        use crate::measure::stats::{Aggregate, Metric, Recorder};
        use std::time::Duration;

        let mut rng = fastrand::Rng::with_seed(7);
        let samples: Vec<u64> = (0..200_000)
            .map(|_| {
                // A long-tailed latency: mostly 1-20 ms, a few up to 2 s.
                if rng.u32(0..100) == 0 {
                    rng.u64(20_000..2_000_000)
                } else {
                    rng.u64(1_000..20_000)
                }
            })
            .collect();
        let mut one = Sketch::new(Precision::Run);
        let mut parts: Vec<Recorder> = (0..16).map(|_| Recorder::default()).collect();
        let mut merged = Aggregate::default();
        // Four seconds of 50,000 samples, spread over the workers.
        for (second, chunk) in samples.chunks(50_000).enumerate() {
            for (i, us) in chunk.iter().enumerate() {
                one.record(*us);
                parts[i % 16].latency(Metric::Ping, Duration::from_micros(*us));
            }
            for part in parts.iter_mut() {
                let tick = part.take_window(second as u64);
                let line = serde_json::to_string(&FromWorker::Tick(tick)).unwrap();
                match serde_json::from_str::<FromWorker>(&line).unwrap() {
                    FromWorker::Tick(t) => {
                        merged.add_tick(&t).unwrap();
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        let m = &merged.sketches["ping"];
        assert_eq!(m.count(), samples.len() as u64);
        assert_eq!(m.summary(), one.summary());
        let mut sorted = samples.clone();
        sorted.sort_unstable();
        for q in [0.5, 0.9, 0.99, 0.999, 0.9999] {
            let exact = sorted[((q * sorted.len() as f64).ceil() as usize).min(sorted.len()) - 1];
            let got = m.quantile_micros(q);
            assert_eq!(got, one.quantile_micros(q), "p{q}");
            let error = (got as f64 - exact as f64).abs() / exact as f64;
            assert!(error <= 0.01, "p{q}: {got} µs against exactly {exact} µs");
        }
    }

    #[test]
    fn tokens_must_match_exactly() {
        assert!(token_matches("a-long-shared-token", "a-long-shared-token"));
        assert!(!token_matches("a-long-shared-tokem", "a-long-shared-token"));
        assert!(!token_matches("a-long-shared", "a-long-shared-token"));
        assert!(!token_matches("", "a-long-shared-token"));
    }
}
