//! A worker process: runs its share of the players on one single-threaded runtime.
//!
//! The coordinator starts `swarm worker` (a hidden subcommand) and writes one JSON line on its
//! stdin, a [`WorkerConfig`]; then it keeps stdin open. Closing it (the coordinator stopping or
//! dying) stops the worker early, so workers are never orphaned. The worker writes one JSON line
//! per second on stdout (a [`Tick`](crate::measure::stats::Tick)) and a final
//! [`WorkerResult`].
//!
//! Why one thread: players spend their life waiting, so one core drives tens of thousands of
//! them, and a single thread lets them share the recorder through a `RefCell` with no atomics or
//! locks. More cores mean more workers, which also keeps each process under the open-file limit.

use std::cell::{Cell, RefCell};
use std::io::{BufRead as _, Read as _, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};

use crate::measure::resources;
use crate::measure::stats::{Recorder, WorkerMessage, WorkerResult};
use crate::net::failure::Failure;
use crate::net::transport::{WS_BUFFER, WS_CHAT_BUFFER};
use crate::scenario::{Scenario, Step};
use crate::steps::chat::WallClock;
use crate::steps::ctx::{Ctx, Lifecycle};
use crate::steps::player;

/// Everything a worker needs, sent by the coordinator on the worker's stdin.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerConfig {
    /// The scenario file's text (validated again here, exactly as the coordinator did).
    pub scenario: String,
    /// The scenario's file name, for error messages.
    pub origin: String,
    /// Base URL of the server, e.g. `http://127.0.0.1:7350`.
    pub target: String,
    pub server_key: String,
    /// Players with global index `i` where `i % count == index` are this worker's.
    pub index: u64,
    pub count: u64,
    /// Local address to bind sockets to (spreads ports over 127.0.0.x on loopback targets).
    pub source_ip: Option<IpAddr>,
    /// Unix time (ms) at which the run's second 0 starts, shared by all workers.
    pub start_at_ms: u64,
    /// The run's ID (`loadTestId`), part of every device ID.
    pub run_id: String,
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

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Unix milliseconds now, for the coordinator to pick a start time.
pub fn now_ms() -> u64 {
    epoch_ms()
}

/// Writes one message line on stdout.
fn emit(msg: &WorkerMessage) {
    if let Ok(line) = serde_json::to_string(msg) {
        let mut out = std::io::stdout().lock();
        // A closed stdout means the coordinator is gone; stdin EOF then stops us.
        let _ = out.write_all(line.as_bytes());
        let _ = out.write_all(b"\n");
        let _ = out.flush();
    }
}

/// Entry point of `swarm worker`: reads the config from stdin and runs to completion.
pub fn main() -> anyhow::Result<()> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the worker config from stdin")?;
    let config: WorkerConfig =
        serde_json::from_str(&line).context("the worker config on stdin is not valid")?;
    // Stdin stays open for the whole run; its end means "stop now".
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        let _ = stop_tx.send(());
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the worker runtime")?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, run(config, stop_rx))
}

/// Runs the worker's players and reports.
pub async fn run(
    config: WorkerConfig,
    stop_rx: tokio::sync::oneshot::Receiver<()>,
) -> anyhow::Result<()> {
    let scenario = Scenario::parse(&config.scenario, &config.origin)?;
    let schedule = scenario.schedule();
    let (base_url, host, ws_path, addr) = resolve_target(&config.target).await?;
    let http = reqwest::Client::builder()
        .local_address(config.source_ip)
        .pool_idle_timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .build()
        .context("building the HTTP client")?;
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
        stop: Notify::new(),
        lifecycle: Lifecycle::default(),
    });

    let start =
        Instant::now() + Duration::from_millis(config.start_at_ms.saturating_sub(epoch_ms()));
    let end = start + Duration::from_secs_f64(schedule.duration_s());
    let rss_baseline_kb = resources::rss_kb();
    let cpu_at_launch = resources::cpu_s();
    let rss_peak = Rc::new(Cell::new(rss_baseline_kb));
    let next_tick = Rc::new(Cell::new(0u64));

    // Once a second: ship the window.
    let ticker = {
        let (ctx, rss_peak, next_tick) = (ctx.clone(), rss_peak.clone(), next_tick.clone());
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
                emit(&WorkerMessage::Tick(tick));
            }
        })
    };

    // Start each of our players at its intended time.
    let started = Rc::new(Cell::new(0u64));
    let spawner = {
        let (ctx, started) = (ctx.clone(), started.clone());
        let arrivals: Vec<(u64, f64)> = schedule
            .worker_arrivals(config.index, config.count)
            .collect();
        async move {
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
    let mut last = rec.take_window(next_tick.get());
    last.cpu_s = 0.0;
    last.rss_kb = resources::rss_kb();
    emit(&WorkerMessage::Tick(last));
    let result = WorkerResult {
        index: config.index,
        players: assigned,
        successful: rec.successful,
        failed: rec.failed,
        skipped: assigned.saturating_sub(started.get()),
        counters: rec.totals.clone(),
        errors: rec.errors.clone(),
        sketches: rec.run_sketches(),
        rss_baseline_kb,
        rss_peak_kb: rss_peak.get().max(resources::rss_kb()),
        peak_ccu: rec.peak_ccu,
        cpu_s: resources::cpu_s() - cpu_at_launch,
        source_ip: config.source_ip.map(|ip| ip.to_string()),
        aborted,
    };
    emit(&WorkerMessage::Done(result));
    Ok(())
}
