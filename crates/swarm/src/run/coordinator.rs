//! The coordinator: `swarm run`. Starts or connects to the workers ([`fleet`]), gives each its
//! share and one start instant, merges what they stream, shows live progress and writes the
//! report.
//!
//! Each worker gets a share of the players (round-robin by global index, so every worker sees
//! the same ramp shape at its fraction of the rate) and, against a loopback target, its own
//! source address 127.0.0.(2 + n): each source address has its own ~28,000 ephemeral ports, and
//! each process stays below its open-file limit. All start at one instant, given to each in its
//! own clock (the handshake timed it), and report how late they woke: the start skew.
//!
//! Every tick a worker streams goes into the run's figures and into that second's row at once
//! ([`Aggregate::add_tick`]), so the report's whole-run figures are the sum of its time series.
//! A worker whose connection ends before its result (`lost`), or that is silent for
//! `--worker-silence-s` (`stalled`), is given up on: what it streamed until then stays in the
//! report, anything it sends afterwards is ignored (in the run's figures and in its seconds
//! alike), its players count as failed (those that had not failed already as `worker_lost`), the
//! others go on, and the report names it as partial. Ctrl-C asks every worker to stop and
//! report; a second Ctrl-C stops at once.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::mpsc;

use crate::measure::resources;
use crate::measure::stats::{Aggregate, Streamed, WorkerResult};
use crate::report::{PhaseSummary, Report, RunInfo, Status, WorkerStatus, WorkerSummary};
use crate::run::fleet::{self, ClockSync, Writer};
use crate::run::protocol::{
    epoch_us, read_message, write_message, FromWorker, LineError, ToWorker, MAX_LINE,
};
use crate::run::worker::{self, WorkerConfig};
use crate::scenario::Scenario;

/// How to show progress while the run goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Progress {
    /// A line per second on stderr when it is a terminal, nothing otherwise.
    Auto,
    /// A line per second on stderr.
    Always,
    /// Nothing.
    Never,
    /// One JSON object per second on stderr (for scripts and tests).
    Json,
}

/// Which local addresses workers bind their sockets to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceIps {
    /// 127.0.0.(2 + worker) when the target is an IPv4 loopback address; none otherwise.
    Auto,
    /// Let the OS choose.
    None,
    /// Worker n binds to list[n % len].
    List(Vec<IpAddr>),
}

impl std::str::FromStr for SourceIps {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(SourceIps::Auto),
            "none" => Ok(SourceIps::None),
            list => list
                .split(',')
                .map(|ip| {
                    ip.trim()
                        .parse::<IpAddr>()
                        .map_err(|e| format!("{ip}: {e}"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(SourceIps::List),
        }
    }
}

/// Options of `swarm run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub scenario: PathBuf,
    /// Multiplies the scenario's players and rates (see [`Scenario::scaled`]).
    pub scale: f64,
    /// Base URL of the server, or several separated by commas (independent nodes, or a
    /// cluster's nodes without a load balancer in front): worker `n` plays against the
    /// `n % count`-th.
    pub target: String,
    /// The servers' gRPC addresses (`host:port`, comma-separated as `target`), for steps run
    /// with `api = "grpc"`; each target's port less one when `None` (Nakama's convention).
    pub grpc_target: Option<String>,
    /// Local worker processes; chosen from the player count and the file limit when `None`.
    pub workers: Option<u64>,
    /// Remote workers (`host:port`, a name may resolve to many); local ones when empty.
    pub workers_at: Vec<String>,
    /// Wait until `--workers-at` resolves to at least this many addresses.
    pub expect_workers: Option<u64>,
    /// How long to wait for them.
    pub discover_timeout: Duration,
    /// The token remote workers require.
    pub worker_token: Option<String>,
    /// A worker silent this long after the start is lost.
    pub worker_silence: Duration,
    /// Report directory; `swarm-out/<loadTestId>` when `None`.
    pub out: Option<PathBuf>,
    pub server_key: String,
    pub source_ips: SourceIps,
    /// This machine runs shard `.0` of `.1` (players `i` with `i % .1 == .0`).
    pub shard: (u64, u64),
    pub progress: Progress,
    /// The swarm executable to start local workers from.
    pub exe: PathBuf,
}

/// Time between the last handshake and the start instant: enough to send every worker its
/// share and for each to set up its clients.
const START_LEAD: Duration = Duration::from_millis(1_000);

/// One worker during the run.
struct Slot {
    label: String,
    address: Option<String>,
    child: Option<tokio::process::Child>,
    /// Dropping it closes the worker's input, which stops it.
    writer: Option<Writer>,
    reader_task: Option<tokio::task::JoinHandle<()>>,
    players: u64,
    source_ip: Option<IpAddr>,
    clock: ClockSync,
    late_us: Option<i64>,
    rss_baseline_kb: u64,
    /// What it streamed and the run counted.
    streamed: Streamed,
    result: Option<WorkerResult>,
    finished: bool,
    /// Given up on before its result: `lost` or `stalled`, and why.
    lost: Option<(WorkerStatus, String)>,
    last_heard: tokio::time::Instant,
}

impl Slot {
    /// Gives up on the worker: closes its connection (or its input), kills a local process.
    /// From here on nothing it sent counts, so the run holds exactly what it streamed until now.
    fn lose(&mut self, status: WorkerStatus, reason: String) {
        self.finished = true;
        self.lost = Some((status, reason));
        self.writer = None;
        if let Some(task) = self.reader_task.take() {
            task.abort();
        }
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
    }
}

enum Event {
    /// Boxed: a worker's message is large, and the channel holds many events.
    Message(usize, Box<FromWorker>),
    Garbled(usize, String),
    Ended(usize),
}

fn is_ipv4_loopback_target(target: &str) -> bool {
    reqwest::Url::parse(target)
        .ok()
        .and_then(|u| u.host_str().map(|h| h.to_string()))
        .is_some_and(|h| match h.parse::<IpAddr>() {
            Ok(IpAddr::V4(ip)) => ip.is_loopback(),
            _ => h == "localhost",
        })
}

/// Runs a scenario end to end and returns the report and the directory it was written to.
pub async fn run(opts: RunOptions) -> anyhow::Result<(Report, PathBuf)> {
    let scenario = Scenario::load(&opts.scenario)?.scaled(opts.scale)?;
    let scenario_text = std::fs::read_to_string(&opts.scenario)?;
    let files = scenario
        .replay_files()
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            Ok((path, text))
        })
        .collect::<anyhow::Result<std::collections::HashMap<_, _>>>()?;
    let schedule = scenario.schedule();
    let (shard, shards) = opts.shard;
    if shards == 0 || shard >= shards {
        anyhow::bail!("--shard {shard}/{shards}: the index must be below the count");
    }
    let total = schedule.total_players();
    let shard_players = if shard >= total {
        0
    } else {
        (total - shard).div_ceil(shards)
    };

    let targets: Vec<&str> = opts
        .target
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if targets.is_empty() {
        anyhow::bail!("--target names no server");
    }

    let mut members = if opts.workers_at.is_empty() {
        let per_worker_max = worker::capacity();
        let workers = match opts.workers {
            Some(0) => anyhow::bail!("--workers must be at least 1"),
            Some(n) => n,
            None => shard_players.div_ceil(per_worker_max).max(1),
        };
        if shard_players.div_ceil(workers) > per_worker_max {
            anyhow::bail!(
                "{} players per worker would exceed the open-file limit: use --workers {} or more",
                shard_players.div_ceil(workers),
                shard_players.div_ceil(per_worker_max)
            );
        }
        fleet::spawn_local(&opts.exe, workers)?
    } else {
        if opts.workers.is_some() {
            anyhow::bail!(
                "--workers starts local workers; with --workers-at the workers are the remote ones"
            );
        }
        if opts.worker_token.is_none() {
            anyhow::bail!("--workers-at needs the workers' shared token (--worker-token or SWARM_WORKER_TOKEN)");
        }
        let addrs =
            fleet::discover(&opts.workers_at, opts.expect_workers, opts.discover_timeout).await?;
        fleet::connect_remote(&addrs).await?
    };
    fleet::greet_all(&mut members, opts.worker_token.as_deref()).await?;

    let workers = members.len() as u64;
    let count = shards * workers;
    for (w, m) in members.iter().enumerate() {
        let players = schedule.worker_players(shard + shards * w as u64, count);
        if players > m.max_players {
            anyhow::bail!(
                "worker {} would get {players} players but holds at most {} (its open-file limit): add workers",
                m.label,
                m.max_players
            );
        }
    }

    let load_test_id = uuid::Uuid::new_v4().to_string();
    let start_at_us = epoch_us() + START_LEAD.as_micros() as u64;
    let start = tokio::time::Instant::now() + START_LEAD;

    let (tx, mut rx) = mpsc::channel::<Event>(1024);
    let mut slots = Vec::new();
    for (w, mut m) in members.into_iter().enumerate() {
        let w = w as u64;
        // Global worker index across shards, so shards never run the same player.
        let global = shard + shards * w;
        let target = targets[(global % targets.len() as u64) as usize];
        let grpc_target = opts.grpc_target.as_deref().and_then(|list| {
            let grpc: Vec<&str> = list
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .collect();
            (!grpc.is_empty()).then(|| grpc[(global % grpc.len() as u64) as usize].to_owned())
        });
        let loopback = is_ipv4_loopback_target(target);
        let source_ip = match &opts.source_ips {
            SourceIps::None => None,
            SourceIps::List(l) if !l.is_empty() => Some(l[(w as usize) % l.len()]),
            SourceIps::List(_) => None,
            SourceIps::Auto if loopback => {
                Some(IpAddr::from([127, 0, 0, 2 + (global % 250) as u8]))
            }
            SourceIps::Auto => None,
        };
        let config = WorkerConfig {
            scenario: scenario_text.clone(),
            origin: opts.scenario.display().to_string(),
            scale: opts.scale,
            target: target.to_string(),
            grpc_target,
            server_key: opts.server_key.clone(),
            index: global,
            count,
            source_ip,
            start_at_us: start_at_us.saturating_add_signed(m.clock.offset_us),
            run_id: load_test_id.clone(),
            files: files.clone(),
        };
        write_message(&mut m.writer, &ToWorker::Start(Box::new(config)))
            .await
            .with_context(|| format!("starting worker {}", m.label))?;
        let tx = tx.clone();
        let idx = slots.len();
        let mut reader = m.reader;
        let reader_task = tokio::spawn(async move {
            loop {
                let event = match read_message::<FromWorker>(&mut reader, MAX_LINE).await {
                    Ok(message) => Event::Message(idx, Box::new(message)),
                    Err(LineError::Garbled(line)) => Event::Garbled(idx, line),
                    Err(_) => break,
                };
                if tx.send(event).await.is_err() {
                    return;
                }
            }
            let _ = tx.send(Event::Ended(idx)).await;
        });
        slots.push(Slot {
            label: m.label,
            address: m.address.map(|a| a.to_string()),
            child: m.child,
            writer: Some(m.writer),
            reader_task: Some(reader_task),
            players: schedule.worker_players(global, count),
            source_ip,
            clock: m.clock,
            late_us: None,
            rss_baseline_kb: 0,
            streamed: Streamed::default(),
            result: None,
            finished: false,
            lost: None,
            last_heard: start,
        });
    }
    drop(tx);

    let mut agg = Aggregate::default();
    let mut progress = ProgressView::new(opts.progress, shard_players, slots.len() as u64);
    let mut stopped = false;
    let mut ctrl_c = Box::pin(tokio::signal::ctrl_c());
    let mut watch = tokio::time::interval(Duration::from_secs(1));
    while slots.iter().any(|p| !p.finished) {
        tokio::select! {
            // Messages first: a tick already received is never taken for silence.
            biased;
            event = rx.recv() => match event {
                // A worker given up on (lost, stalled) no longer counts, whatever it still sends.
                Some(Event::Message(i, _)) if slots[i].lost.is_some() => {}
                Some(Event::Message(i, message)) => {
                    slots[i].last_heard = tokio::time::Instant::now();
                    match *message {
                        FromWorker::Tick(tick) => {
                            let counts = agg.add_tick(&tick).context("merging a worker's tick")?;
                            slots[i].streamed.add(&tick, &counts);
                            let live = slots.iter().filter(|p| !p.finished).count() as u64;
                            progress.show_ready(&agg, live);
                        }
                        FromWorker::Done(result) => {
                            agg.add_result(&result);
                            slots[i].result = Some(result);
                        }
                        FromWorker::Started {
                            late_us,
                            rss_baseline_kb,
                        } => {
                            slots[i].late_us = Some(late_us);
                            slots[i].rss_baseline_kb = rss_baseline_kb;
                        }
                        FromWorker::Refused { reason } => {
                            slots[i].lose(WorkerStatus::Lost, format!("it failed: {reason}"));
                            announce_lost(&slots[i]);
                        }
                        other => eprintln!("swarm: worker {} sent {other:?} during the run", slots[i].label),
                    }
                }
                Some(Event::Garbled(i, line)) => {
                    eprintln!("swarm: worker {} wrote an unreadable line: {line}", slots[i].label);
                }
                Some(Event::Ended(i)) => {
                    let slot = &mut slots[i];
                    slot.finished = true;
                    if slot.result.is_none() && slot.lost.is_none() {
                        slot.lose(
                            WorkerStatus::Lost,
                            "its connection ended before its result".into(),
                        );
                        announce_lost(slot);
                    }
                }
                None => break,
            },
            _ = watch.tick() => {
                let now = tokio::time::Instant::now();
                // A worker that sent its result is only closing its connection.
                for slot in slots.iter_mut().filter(|s| !s.finished && s.result.is_none()) {
                    if now > slot.last_heard + opts.worker_silence {
                        slot.lose(
                            WorkerStatus::Stalled,
                            format!("silent for {:?}", opts.worker_silence),
                        );
                        announce_lost(slot);
                    }
                }
                let live = slots.iter().filter(|p| !p.finished).count() as u64;
                progress.show_ready(&agg, live);
            }
            _ = &mut ctrl_c => {
                if stopped {
                    eprintln!("swarm: stopping now, without waiting for the workers' results");
                    for slot in slots.iter_mut().filter(|s| !s.finished && s.result.is_none()) {
                        slot.lose(WorkerStatus::Lost, "the coordinator was interrupted twice".into());
                    }
                    break;
                }
                eprintln!("swarm: stopping; workers are closing their sockets and reporting (Ctrl-C again to stop at once)");
                stopped = true;
                ctrl_c = Box::pin(tokio::signal::ctrl_c());
                for slot in slots.iter_mut() {
                    if let Some(writer) = slot.writer.as_mut() {
                        let _ = write_message(writer, &ToWorker::Stop).await;
                    }
                }
            }
        }
    }
    for slot in slots.iter_mut() {
        slot.writer = None;
        if let Some(child) = slot.child.as_mut() {
            let _ = child.wait().await;
        }
    }
    progress.show_ready(&agg, 0);

    let mut status = if stopped {
        Status::Aborted
    } else {
        Status::Completed
    };
    let mut summaries = Vec::new();
    for (w, slot) in slots.iter().enumerate() {
        let mut summary = match &slot.result {
            Some(r) => {
                if r.aborted {
                    status = status.worst(Status::Aborted);
                }
                WorkerSummary::from(r)
            }
            None => {
                // Its players that failed before it was lost came with its ticks, by kind.
                agg.add_lost(slot.players, slot.streamed.counters.errors, "worker_lost");
                status = Status::Failed;
                WorkerSummary {
                    index: shard + shards * w as u64,
                    players: slot.players,
                    failed: slot.players,
                    source_ip: slot.source_ip.map(|ip| ip.to_string()),
                    reported: false,
                    status: slot
                        .lost
                        .as_ref()
                        .map_or(WorkerStatus::Lost, |(status, _)| *status),
                    peak_ccu: slot.streamed.peak_ccu,
                    rss_baseline_kb: slot.rss_baseline_kb,
                    rss_peak_kb: slot.streamed.rss_peak_kb,
                    cpu_s: slot.streamed.cpu_s,
                    ..Default::default()
                }
            }
        };
        summary.address = slot.address.clone();
        summary.lost = slot.lost.as_ref().map(|(_, why)| why.clone());
        summary.counts = slot.streamed.counts.clone();
        summary.streamed_s = slot.streamed.seconds;
        summary.start_late_ms = slot.late_us.map(|us| us as f64 / 1000.0);
        summary.clock_offset_ms = Some(slot.clock.offset_us as f64 / 1000.0);
        summary.clock_rtt_ms = Some(slot.clock.rtt_us as f64 / 1000.0);
        summaries.push(summary);
    }
    let lates: Vec<i64> = slots.iter().filter_map(|s| s.late_us).collect();
    let start_skew_ms = match (lates.iter().min(), lates.iter().max()) {
        (Some(lo), Some(hi)) => Some((hi - lo) as f64 / 1000.0),
        _ => None,
    };
    let clock_uncertainty_ms = slots
        .iter()
        .map(|s| s.clock.rtt_us as f64 / 2000.0)
        .fold(0.0, f64::max);
    let info = RunInfo {
        load_test_id: load_test_id.clone(),
        status,
        scenario: scenario.name.clone(),
        target: opts.target.clone(),
        started_at_ms: start_at_us / 1000,
        duration_s: start.elapsed().as_secs_f64(),
        workers: summaries,
        start_skew_ms,
        clock_uncertainty_ms: Some(clock_uncertainty_ms),
        coordinator_rss_peak_kb: resources::rss_peak_kb(),
        phases: schedule
            .phases
            .iter()
            .map(|p| PhaseSummary::planned(&p.name, p.start_s, p.duration_s))
            .collect(),
    };
    let report = Report::build(info, &agg);
    let dir = opts
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("swarm-out").join(&load_test_id));
    report.write(&dir)?;
    Ok((report, dir))
}

fn announce_lost(slot: &Slot) {
    let (status, why) = slot
        .lost
        .as_ref()
        .map_or(("lost", "?"), |(status, why)| (status.name(), why.as_str()));
    eprintln!(
        "swarm: worker {} {status} ({why}); its {} players count as failed, the {} seconds it streamed stay in the report, the run goes on",
        slot.label, slot.players, slot.streamed.seconds
    );
}

/// Live progress: one line per completed second.
struct ProgressView {
    mode: Progress,
    players: u64,
    workers: u64,
    next: u64,
    started: u64,
    errors: u64,
    /// Samples by metric over the seconds shown so far.
    samples: BTreeMap<String, u64>,
}

impl ProgressView {
    fn new(mode: Progress, players: u64, workers: u64) -> Self {
        let mode = match mode {
            Progress::Auto if std::io::stderr().is_terminal() => Progress::Always,
            Progress::Auto => Progress::Never,
            m => m,
        };
        ProgressView {
            mode,
            players,
            workers,
            next: 0,
            started: 0,
            errors: 0,
            samples: BTreeMap::new(),
        }
    }

    /// Shows every second that all `live` workers have reported (all of them when `live` is 0).
    fn show_ready(&mut self, agg: &Aggregate, live: u64) {
        while let Some(sec) = agg.seconds.get(&self.next) {
            if live > 0 && sec.reporters < live {
                return;
            }
            self.started += sec.counters.arrivals;
            self.errors += sec.counters.errors;
            for (name, sketch) in &sec.sketches {
                *self.samples.entry(name.clone()).or_insert(0) += sketch.count();
            }
            let p99: BTreeMap<&str, f64> = sec
                .sketches
                .iter()
                .map(|(k, s)| (k.as_str(), s.quantile_micros(0.99) as f64 / 1000.0))
                .collect();
            match self.mode {
                Progress::Always => {
                    let lat: Vec<String> = p99.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
                    eprintln!(
                        "[{:>5}s] workers {}/{} players {}/{} ccu {} arrivals/s {} sends/s {} errors/s {} (total {}) p99 ms: {}",
                        self.next,
                        live,
                        self.workers,
                        self.started,
                        self.players,
                        sec.ccu,
                        sec.counters.arrivals,
                        sec.counters.sends,
                        sec.counters.errors,
                        self.errors,
                        lat.join(", ")
                    );
                }
                Progress::Json => {
                    let line = serde_json::json!({
                        "t": self.next,
                        "workers": live,
                        "started": self.started,
                        "players": self.players,
                        "ccu": sec.ccu,
                        "arrivals": sec.counters.arrivals,
                        "sends": sec.counters.sends,
                        "errors": sec.counters.errors,
                        "errorsTotal": self.errors,
                        "samplesTotal": self.samples,
                        "p99": p99,
                    });
                    eprintln!("{line}");
                }
                Progress::Auto | Progress::Never => {}
            }
            self.next += 1;
        }
    }
}
