//! A worker: runs its share of the players on one single-threaded runtime.
//!
//! A worker is either a child of `swarm run` on the same machine (the hidden `swarm worker`,
//! talking over its stdin and stdout) or a process on another machine (`swarm worker --listen`,
//! see [`listen`](crate::run::listen)); both speak the [`protocol`]: a
//! handshake, a [`WorkerConfig`], one [`Tick`](crate::measure::stats::Tick) per second and a
//! final [`WorkerResult`]. The end of its input (the coordinator stopping or dying) stops the
//! worker early, so workers are never orphaned.
//!
//! Why one thread: players spend their life waiting, so one core drives tens of thousands of
//! them, and a single thread lets them share the recorder through a `RefCell` with no atomics or
//! locks. More cores mean more workers, which also keeps each process under the open-file limit.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncWrite, BufReader};
use tokio::sync::{mpsc, Notify};
use tokio::time::{sleep_until, Instant};

use crate::measure::resources;
use crate::measure::stats::{Recorder, WorkerResult};
use crate::net::failure::Failure;
use crate::net::transport::{WS_BUFFER, WS_CHAT_BUFFER};
use crate::run::protocol::{
    self, epoch_us, read_message, FromWorker, LineError, ToWorker, MAX_HELLO_LINE, MAX_LINE,
    PROTOCOL_VERSION,
};
use crate::scenario::{replay, Scenario, Step};
use crate::steps::chat::WallClock;
use crate::steps::ctx::{Ctx, Lifecycle};
use crate::steps::player;

/// Sockets one worker may hold, at most, whatever its file limit says.
pub const MAX_PLAYERS_PER_WORKER: u64 = 18_000;
/// Files a worker keeps for itself (runtime, pipes, HTTP connections) under its limit.
const FD_RESERVE: u64 = 1_000;

/// How many players this process can hold: its open-file limit less a reserve, at most
/// [`MAX_PLAYERS_PER_WORKER`].
pub fn capacity() -> u64 {
    let fd_limit = resources::open_files_limit().unwrap_or(20_000);
    MAX_PLAYERS_PER_WORKER
        .min(fd_limit.saturating_sub(FD_RESERVE))
        .max(1)
}

/// Everything a worker needs, sent by the coordinator in its `start` message.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerConfig {
    /// The scenario file's text (validated again here, exactly as the coordinator did).
    pub scenario: String,
    /// The scenario's file name, for error messages.
    pub origin: String,
    /// The `--scale` factor applied to the scenario's players and rates.
    pub scale: f64,
    /// Base URL of the server, e.g. `http://127.0.0.1:7350`.
    pub target: String,
    /// The server's gRPC address (`host:port`); the target's port less one when absent.
    #[serde(default)]
    pub grpc_target: Option<String>,
    pub server_key: String,
    /// Players with global index `i` where `i % count == index` are this worker's.
    pub index: u64,
    pub count: u64,
    /// Local address to bind sockets to (spreads ports over 127.0.0.x on loopback targets).
    pub source_ip: Option<IpAddr>,
    /// The instant the run's second 0 starts, in µs since the Unix epoch by *this worker's*
    /// clock (the coordinator converts its own start instant with the clock offset it measured).
    pub start_at_us: u64,
    /// The run's ID (`loadTestId`), part of every device ID.
    pub run_id: String,
    /// The replay files the scenario names, path (as the scenario resolves it) → text, so a
    /// worker on another machine needs none of them on disk.
    #[serde(default)]
    pub files: HashMap<PathBuf, String>,
}

/// Parses `http://host:port[/prefix]` into what players need.
async fn resolve_target(target: &str) -> anyhow::Result<(String, String, String, SocketAddr)> {
    let url = reqwest::Url::parse(target).with_context(|| format!("bad --target {target}"))?;
    if url.scheme() != "http" {
        anyhow::bail!("--target must be an http:// URL (TLS is not supported yet): {target}");
    }
    let host = url
        .host_str()
        .ok_or_else(|| anyhow::anyhow!("--target has no host: {target}"))?
        .to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    let addr = tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
        .await
        .with_context(|| format!("cannot resolve {host}"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{host} resolves to no address"))?;
    let path = url.path().trim_end_matches('/');
    let base = format!("http://{host}:{port}{path}");
    Ok((base, format!("{host}:{port}"), format!("{path}/ws"), addr))
}

/// Entry point of the hidden `swarm worker`: a child of `swarm run`, talking over its stdin and
/// stdout, until its run is over.
pub fn main_stdio() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the worker runtime")?;
    let local = tokio::task::LocalSet::new();
    let result = local.block_on(&runtime, async {
        let mut input = BufReader::new(tokio::io::stdin());
        let mut output = tokio::io::stdout();
        let verdict = read_hello(&mut input, None).await;
        answer_hello(&mut output, &verdict).await?;
        verdict.map_err(|reason| anyhow::anyhow!("refused the coordinator: {reason}"))?;
        serve_run(input, output).await.map(|_| ())
    });
    // Reading stdin blocks a thread that only the coordinator closing it would end.
    runtime.shutdown_background();
    result
}

/// Reads a coordinator's `hello`; `Err` is the reason to refuse it. `token` is the shared token
/// a listening worker requires.
pub async fn read_hello(
    input: &mut (impl AsyncBufRead + Unpin),
    token: Option<&str>,
) -> Result<(), String> {
    match read_message::<ToWorker>(input, MAX_HELLO_LINE).await {
        Ok(ToWorker::Hello { version, .. }) if version != PROTOCOL_VERSION => Err(format!(
            "protocol version {version}, but this worker speaks {PROTOCOL_VERSION}: use the same swarm build on both sides"
        )),
        Ok(ToWorker::Hello {
            token: presented, ..
        }) => match token {
            Some(expected)
                if !presented
                    .as_deref()
                    .is_some_and(|p| protocol::token_matches(p, expected)) =>
            {
                Err("wrong or missing worker token".to_string())
            }
            _ => Ok(()),
        },
        Ok(_) => Err("expected hello first".to_string()),
        Err(e) => Err(format!("expected hello first: {e}")),
    }
}

/// Answers a hello: `welcome` with this worker's capacity, or `refused` with the reason.
pub async fn answer_hello(
    output: &mut (impl AsyncWrite + Unpin),
    verdict: &Result<(), String>,
) -> std::io::Result<()> {
    let answer = match verdict {
        Ok(()) => FromWorker::Welcome {
            version: PROTOCOL_VERSION,
            max_players: capacity(),
        },
        Err(reason) => FromWorker::Refused {
            reason: reason.clone(),
        },
    };
    protocol::write_message(output, &answer).await
}

/// The rest of a welcomed coordinator's conversation: pings, then `start`, the run and `done`.
/// Returns whether a run took place (a coordinator may also leave before starting one). Must be
/// called on a [`LocalSet`](tokio::task::LocalSet).
pub async fn serve_run(
    mut input: impl AsyncBufRead + Unpin + 'static,
    mut output: impl AsyncWrite + Unpin + 'static,
) -> anyhow::Result<bool> {
    let config = loop {
        match read_message::<ToWorker>(&mut input, MAX_LINE).await {
            Ok(ToWorker::Ping { coordinator_us }) => {
                let pong = FromWorker::Pong {
                    coordinator_us,
                    worker_us: epoch_us(),
                };
                protocol::write_message(&mut output, &pong).await?;
            }
            Ok(ToWorker::Start(config)) => break *config,
            Ok(ToWorker::Stop) | Err(LineError::Closed) => return Ok(false),
            Ok(other) => anyhow::bail!("unexpected {other:?} before start"),
            Err(e) => anyhow::bail!("reading the coordinator: {e}"),
        }
    };

    // From here the coordinator only ever says stop; so does the end of its input.
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let listener = tokio::task::spawn_local(async move {
        loop {
            match read_message::<ToWorker>(&mut input, MAX_LINE).await {
                Ok(ToWorker::Stop) | Err(_) => break,
                Ok(_) => continue,
            }
        }
        let _ = stop_tx.send(());
    });
    let (out, mut outbox) = mpsc::unbounded_channel::<FromWorker>();
    let writer = tokio::task::spawn_local(async move {
        while let Some(message) = outbox.recv().await {
            // A write error means the coordinator is gone; the listener then stops the run.
            if protocol::write_message(&mut output, &message)
                .await
                .is_err()
            {
                break;
            }
        }
    });
    let failure = out.clone();
    let result = run(config, stop_rx, out).await;
    if let Err(e) = &result {
        // The coordinator reports the worker lost, with this reason.
        let _ = failure.send(FromWorker::Refused {
            reason: format!("{e:#}"),
        });
    }
    drop(failure);
    // Every message sent, the writer ends with the channel.
    let _ = writer.await;
    listener.abort();
    result.map(|_| true)
}

/// Runs the worker's players and reports.
pub async fn run(
    config: WorkerConfig,
    stop_rx: tokio::sync::oneshot::Receiver<()>,
    out: mpsc::UnboundedSender<FromWorker>,
) -> anyhow::Result<()> {
    replay::provide_shipped(config.files.clone());
    crate::steps::game::forget_replays();
    let scenario = Scenario::parse(&config.scenario, &config.origin)?.scaled(config.scale)?;
    let schedule = scenario.schedule();
    let (base_url, host, ws_path, addr) = resolve_target(&config.target).await?;
    let http = reqwest::Client::builder()
        .local_address(config.source_ip)
        .pool_idle_timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .build()
        .context("building the HTTP client")?;
    // Nakama's convention when not given: the gRPC port is the HTTP port less one.
    let grpc_addr = match &config.grpc_target {
        Some(grpc) => tokio::net::lookup_host(grpc.as_str())
            .await
            .ok()
            .and_then(|mut addrs| addrs.next())
            .with_context(|| format!("bad --grpc-target {grpc}"))?,
        None => SocketAddr::new(addr.ip(), addr.port().saturating_sub(1)),
    };
    let steps = scenario.steps.clone();
    let token_needed_after = (0..steps.len())
        .map(|i| steps[i + 1..].iter().any(Step::needs_token))
        .collect();
    let ctx = Rc::new(Ctx {
        http,
        base_url,
        host,
        ws_path,
        addr,
        source_ip: config.source_ip,
        server_key: config.server_key.clone(),
        run_tag: config
            .run_id
            .chars()
            .filter(|c| *c != '-')
            .take(12)
            .collect(),
        steps,
        token_needed_after,
        default_timeout: scenario.timeout_s.as_duration(),
        clock: WallClock::now(),
        read_buffer: if scenario
            .steps
            .iter()
            .any(|s| matches!(s, Step::ChatJoin(_)))
        {
            WS_CHAT_BUFFER
        } else {
            WS_BUFFER
        },
        rec: RefCell::new(Recorder::default()),
        enet: Default::default(),
        grpc: crate::net::grpc::GrpcClients::lazy(grpc_addr),
        stop: Notify::new(),
        lifecycle: Lifecycle::default(),
    });

    let start =
        Instant::now() + Duration::from_micros(config.start_at_us.saturating_sub(epoch_us()));
    let end = start + Duration::from_secs_f64(schedule.duration_s());
    let rss_baseline_kb = resources::rss_kb();
    let cpu_at_launch = resources::cpu_s();
    let rss_peak = Rc::new(Cell::new(rss_baseline_kb));
    let next_tick = Rc::new(Cell::new(0u64));

    // Once a second: ship the window.
    let ticker = {
        let (ctx, rss_peak, next_tick) = (ctx.clone(), rss_peak.clone(), next_tick.clone());
        let out = out.clone();
        tokio::task::spawn_local(async move {
            let mut cpu_prev = resources::cpu_s();
            loop {
                let k = next_tick.get();
                sleep_until(start + Duration::from_secs(k + 1)).await;
                let mut tick = ctx.rec.borrow_mut().take_window(k);
                let cpu = resources::cpu_s();
                tick.cpu_s = cpu - cpu_prev;
                cpu_prev = cpu;
                tick.rss_kb = resources::rss_kb();
                rss_peak.set(rss_peak.get().max(tick.rss_kb));
                next_tick.set(k + 1);
                let _ = out.send(FromWorker::Tick(tick));
            }
        })
    };

    // Start each of our players at its intended time.
    let started = Rc::new(Cell::new(0u64));
    let spawner = {
        let (ctx, started, out) = (ctx.clone(), started.clone(), out.clone());
        let arrivals: Vec<(u64, f64)> = schedule
            .worker_arrivals(config.index, config.count)
            .collect();
        let start_at_us = config.start_at_us;
        async move {
            // The barrier: every worker wakes for the same instant; how late this one woke is
            // its share of the start skew.
            sleep_until(start).await;
            let late_us = epoch_us() as i64 - start_at_us as i64;
            let _ = out.send(FromWorker::Started {
                late_us,
                rss_baseline_kb,
            });
            for (i, t) in arrivals {
                let at = start + Duration::from_secs_f64(t);
                sleep_until(at).await;
                started.set(started.get() + 1);
                ctx.player_started();
                tokio::task::spawn_local(player::run(ctx.clone(), i, at));
            }
            sleep_until(end).await;
        }
    };
    let aborted = tokio::select! {
        _ = spawner => false,
        _ = stop_rx => true,
    };

    // The run is over: wake idle players so they close, give busy ones the grace period.
    ctx.end_run();
    let grace = Instant::now() + scenario.grace_s.as_duration();
    let _ = tokio::time::timeout_at(grace, ctx.all_finished()).await;
    ticker.abort();

    let assigned = schedule.worker_players(config.index, config.count);
    let mut rec = ctx.rec.borrow_mut();
    let unfinished = ctx.active_players();
    for _ in 0..unfinished {
        rec.failed += 1;
        rec.failure(&Failure::Unfinished.kind());
    }
    // Whatever the players measured since the last second, unfinished failures included: the
    // run's figures are the sum of the ticks, so nothing may stay behind in the recorder.
    let mut last = rec.take_window(next_tick.get());
    last.cpu_s = 0.0;
    last.rss_kb = resources::rss_kb();
    let _ = out.send(FromWorker::Tick(last));
    let result = WorkerResult {
        index: config.index,
        players: assigned,
        successful: rec.successful,
        failed: rec.failed,
        skipped: assigned.saturating_sub(started.get()),
        rss_baseline_kb,
        rss_peak_kb: rss_peak.get().max(resources::rss_kb()),
        peak_ccu: rec.peak_ccu,
        cpu_s: resources::cpu_s() - cpu_at_launch,
        source_ip: config.source_ip.map(|ip| ip.to_string()),
        aborted,
    };
    let _ = out.send(FromWorker::Done(result));
    Ok(())
}
