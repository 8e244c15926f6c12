//! The coordinator's workers before a run starts: starting local ones, finding and connecting to
//! remote ones, and greeting each (the token, its capacity, its clock).
//!
//! Local workers are this binary re-executed as `swarm worker`, talking over pipes. Remote ones
//! are `swarm worker --listen` processes named by `--workers-at`: each entry is `host:port`, and a
//! name that resolves to several addresses (a Kubernetes headless Service) stands for all of
//! them. Either way every worker gets the same handshake, so a run treats them alike.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncBufRead, AsyncWrite, BufReader};
use tokio::process::{Child, Command};

use crate::run::protocol::{
    epoch_us, read_message, write_message, FromWorker, ToWorker, MAX_LINE, PROTOCOL_VERSION,
};

/// Pings sent to time a worker's clock; the one with the shortest round trip is kept.
const CLOCK_PINGS: usize = 7;
/// How long a worker has to answer the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long connecting to a remote worker may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub type Reader = Box<dyn AsyncBufRead + Unpin + Send>;
pub type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// A worker's clock against the coordinator's.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClockSync {
    /// Worker clock minus coordinator clock, µs.
    pub offset_us: i64,
    /// Round trip of the ping the offset came from, µs: the offset is right to within half of it.
    pub rtt_us: u64,
}

/// One greeted worker, ready to be given its share.
pub struct Member {
    /// `local N` or the remote address.
    pub label: String,
    /// The address of a remote worker.
    pub address: Option<SocketAddr>,
    /// The child process of a local worker (killed if dropped).
    pub child: Option<Child>,
    pub reader: Reader,
    pub writer: Writer,
    /// Players it says it can hold.
    pub max_players: u64,
    pub clock: ClockSync,
}

/// Starts `count` local workers from `exe`.
pub fn spawn_local(exe: &Path, count: u64) -> anyhow::Result<Vec<Member>> {
    (0..count)
        .map(|n| {
            let mut child = Command::new(exe)
                .arg("worker")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("starting worker {n} from {}", exe.display()))?;
            let writer = child.stdin.take().context("worker stdin")?;
            let reader = child.stdout.take().context("worker stdout")?;
            Ok(Member {
                label: format!("local {n}"),
                address: None,
                child: Some(child),
                reader: Box::new(BufReader::new(reader)),
                writer: Box::new(writer),
                max_players: 0,
                clock: ClockSync::default(),
            })
        })
        .collect()
}

/// Resolves `--workers-at` entries into worker addresses (sorted, without repeats). With
/// `expect`, resolves again every second until at least that many answer or `wait` is over:
/// pods behind a headless Service appear one by one.
pub async fn discover(
    entries: &[String],
    expect: Option<u64>,
    wait: Duration,
) -> anyhow::Result<Vec<SocketAddr>> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let mut found = Vec::new();
        let mut unresolved = Vec::new();
        for entry in entries {
            match tokio::net::lookup_host(entry.as_str()).await {
                Ok(addrs) => found.extend(addrs),
                Err(e) => unresolved.push(format!("{entry}: {e}")),
            }
        }
        found.sort();
        found.dedup();
        let enough = match expect {
            Some(n) => found.len() as u64 >= n,
            None => unresolved.is_empty() && !found.is_empty(),
        };
        if enough {
            return Ok(found);
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "--workers-at found {} worker address(es){}{}",
                found.len(),
                expect
                    .map(|n| format!(", {n} expected"))
                    .unwrap_or_default(),
                if unresolved.is_empty() {
                    String::new()
                } else {
                    format!("; unresolved: {}", unresolved.join("; "))
                }
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Connects to remote workers.
pub async fn connect_remote(addrs: &[SocketAddr]) -> anyhow::Result<Vec<Member>> {
    let connects = addrs.iter().map(|addr| async move {
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
            .await
            .map_err(|_| {
                anyhow::anyhow!("worker at {addr}: no connection within {CONNECT_TIMEOUT:?}")
            })?
            .with_context(|| format!("worker at {addr}"))?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        Ok::<_, anyhow::Error>(Member {
            label: addr.to_string(),
            address: Some(*addr),
            child: None,
            reader: Box::new(BufReader::new(read)),
            writer: Box::new(write),
            max_players: 0,
            clock: ClockSync::default(),
        })
    });
    futures_util::future::try_join_all(connects).await
}

/// Greets every worker at once: hello with the token, welcome, then the clock pings.
pub async fn greet_all(members: &mut [Member], token: Option<&str>) -> anyhow::Result<()> {
    let greetings = members.iter_mut().map(|m| async move {
        tokio::time::timeout(HANDSHAKE_TIMEOUT, greet(m, token))
            .await
            .map_err(|_| anyhow::anyhow!("no handshake within {HANDSHAKE_TIMEOUT:?}"))?
            .with_context(|| format!("worker {}", m.label))
    });
    futures_util::future::try_join_all(greetings).await?;
    Ok(())
}

async fn greet(m: &mut Member, token: Option<&str>) -> anyhow::Result<()> {
    let hello = ToWorker::Hello {
        version: PROTOCOL_VERSION,
        token: token.map(str::to_string),
    };
    write_message(&mut m.writer, &hello).await?;
    match read_message::<FromWorker>(&mut m.reader, MAX_LINE).await? {
        FromWorker::Welcome {
            version,
            max_players,
        } if version == PROTOCOL_VERSION => m.max_players = max_players,
        FromWorker::Welcome { version, .. } => anyhow::bail!(
            "speaks protocol version {version}, this coordinator {PROTOCOL_VERSION}: use the same swarm build on both sides"
        ),
        FromWorker::Refused { reason } => anyhow::bail!("refused: {reason}"),
        other => anyhow::bail!("answered hello with {other:?}"),
    }
    let mut best: Option<ClockSync> = None;
    for _ in 0..CLOCK_PINGS {
        let sent = epoch_us();
        write_message(
            &mut m.writer,
            &ToWorker::Ping {
                coordinator_us: sent,
            },
        )
        .await?;
        let (echo, worker_us) = match read_message::<FromWorker>(&mut m.reader, MAX_LINE).await? {
            FromWorker::Pong {
                coordinator_us,
                worker_us,
            } => (coordinator_us, worker_us),
            other => anyhow::bail!("answered a ping with {other:?}"),
        };
        let received = epoch_us();
        if echo != sent {
            anyhow::bail!("answered a ping with another ping's time");
        }
        let rtt_us = received.saturating_sub(sent);
        let midpoint = sent + rtt_us / 2;
        let sync = ClockSync {
            offset_us: worker_us as i64 - midpoint as i64,
            rtt_us,
        };
        if best.is_none_or(|b| rtt_us < b.rtt_us) {
            best = Some(sync);
        }
    }
    m.clock = best.unwrap_or_default();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn discovery_lists_every_address_once_and_waits_for_the_expected_count() {
        let entries = [
            "127.0.0.1:7400".to_string(),
            "127.0.0.1:7400".to_string(),
            "127.0.0.2:7400".to_string(),
        ];
        let found = discover(&entries, None, Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(
            found,
            vec![
                "127.0.0.1:7400".parse::<SocketAddr>().unwrap(),
                "127.0.0.2:7400".parse().unwrap()
            ]
        );
        let found = discover(&entries, Some(2), Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(found.len(), 2);

        let started = std::time::Instant::now();
        let short = discover(&entries, Some(3), Duration::from_millis(1500)).await;
        let message = format!("{:#}", short.unwrap_err());
        assert!(
            message.contains("found 2") && message.contains("3 expected"),
            "{message}"
        );
        assert!(
            started.elapsed() >= Duration::from_millis(1500),
            "it waited"
        );

        let bad = discover(
            &["no-such-host.invalid:7400".to_string()],
            None,
            Duration::ZERO,
        )
        .await;
        let message = format!("{:#}", bad.unwrap_err());
        assert!(message.contains("no-such-host.invalid"), "{message}");
    }
}
