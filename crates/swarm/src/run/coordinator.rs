//! The coordinator: `swarm run`. Spawns the worker processes, merges what they stream, shows
//! live progress and writes the report.
//!
//! Workers are this same binary re-executed with the hidden `worker` subcommand. Each gets a
//! share of the players (round-robin by global index, so every worker sees the same ramp shape)
//! and, against a loopback target, its own source address 127.0.0.(2 + n): each source address
//! has its own ~28,000 ephemeral ports, and each process stays below its open-file limit.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::measure::resources;
use crate::measure::stats::{Aggregate, WorkerMessage, WorkerResult};
use crate::report::{PhaseSummary, Report, RunInfo, Status, WorkerSummary};
use crate::run::worker::{now_ms, WorkerConfig};
use crate::scenario::Scenario;

/// Sockets one worker may hold, at most, whatever its file limit says.
pub const MAX_PLAYERS_PER_WORKER: u64 = 18_000;
/// Files a worker keeps for itself (runtime, pipes, HTTP connections) under its limit.
const FD_RESERVE: u64 = 1_000;

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
    pub target: String,
    /// Worker processes; chosen from the player count and the file limit when `None`.
    pub workers: Option<u64>,
    /// Report directory; `swarm-out/<loadTestId>` when `None`.
    pub out: Option<PathBuf>,
    pub server_key: String,
    pub source_ips: SourceIps,
    /// This machine runs shard `.0` of `.1` (players `i` with `i % .1 == .0`).
    pub shard: (u64, u64),
    pub progress: Progress,
    /// The swarm executable to start workers from.
    pub exe: PathBuf,
}

struct WorkerProc {
    child: Child,
    stdin: Option<ChildStdin>,
    players: u64,
    source_ip: Option<IpAddr>,
    result: Option<WorkerResult>,
    finished: bool,
}

enum Event {
    /// Boxed: a worker's message is large, and the channel holds many events.
    Message(usize, Box<WorkerMessage>),
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
    let scenario = Scenario::load(&opts.scenario)?;
    let scenario_text = std::fs::read_to_string(&opts.scenario)?;
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

    let fd_limit = resources::open_files_limit().unwrap_or(20_000);
    let per_worker_max = MAX_PLAYERS_PER_WORKER
        .min(fd_limit.saturating_sub(FD_RESERVE))
        .max(1);
    let workers = match opts.workers {
        Some(0) => anyhow::bail!("--workers must be at least 1"),
        Some(n) => n,
        None => shard_players.div_ceil(per_worker_max).max(1),
    };
    if shard_players.div_ceil(workers) > per_worker_max {
        anyhow::bail!(
            "{} players per worker would exceed the open-file limit ({fd_limit}): use --workers {} or more",
            shard_players.div_ceil(workers),
            shard_players.div_ceil(per_worker_max)
        );
    }
    let loopback = is_ipv4_loopback_target(&opts.target);
    let load_test_id = uuid::Uuid::new_v4().to_string();
    let started_at_ms = now_ms() + 1_500;
    let wall_start = Instant::now();

    let (tx, mut rx) = mpsc::channel::<Event>(1024);
    let mut procs = Vec::new();
    for w in 0..workers {
        // Global worker index across shards, so shards never run the same player.
        let global = shard + shards * w;
        let count = shards * workers;
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
            target: opts.target.clone(),
            server_key: opts.server_key.clone(),
            index: global,
            count,
            source_ip,
            start_at_ms: started_at_ms,
            run_id: load_test_id.clone(),
        };
        let mut child = Command::new(&opts.exe)
            .arg("worker")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting worker {w} from {}", opts.exe.display()))?;
        let mut stdin = child.stdin.take().context("worker stdin")?;
        let mut line = serde_json::to_string(&config)?;
        line.push('\n');
        stdin.write_all(line.as_bytes()).await?;
        stdin.flush().await?;
        let stdout = child.stdout.take().context("worker stdout")?;
        let tx = tx.clone();
        let idx = procs.len();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let event = match serde_json::from_str::<WorkerMessage>(&line) {
                    Ok(m) => Event::Message(idx, Box::new(m)),
                    Err(_) => Event::Garbled(idx, line),
                };
                if tx.send(event).await.is_err() {
                    return;
                }
            }
            let _ = tx.send(Event::Ended(idx)).await;
        });
        procs.push(WorkerProc {
            child,
            stdin: Some(stdin),
            players: schedule.worker_players(global, count),
            source_ip,
            result: None,
            finished: false,
        });
    }
    drop(tx);

    let mut agg = Aggregate::default();
    let mut progress = ProgressView::new(opts.progress, shard_players);
    let mut stopped = false;
    let mut ctrl_c = Box::pin(tokio::signal::ctrl_c());
    while procs.iter().any(|p| !p.finished) {
        tokio::select! {
            event = rx.recv() => match event {
                Some(Event::Message(i, message)) => match *message {
                    WorkerMessage::Tick(tick) => {
                        agg.add_tick(&tick).context("merging a worker's tick")?;
                        let live = procs.iter().filter(|p| !p.finished).count() as u64;
                        progress.show_ready(&agg, live);
                    }
                    WorkerMessage::Done(result) => {
                        agg.add_result(&result).context("merging a worker's result")?;
                        procs[i].result = Some(result);
                    }
                },
                Some(Event::Garbled(i, line)) => {
                    eprintln!("swarm: worker {i} wrote an unreadable line: {line}");
                }
                Some(Event::Ended(i)) => procs[i].finished = true,
                None => break,
            },
            _ = &mut ctrl_c, if !stopped => {
                // Closing the workers' stdin asks them to stop and report what they have.
                eprintln!("swarm: stopping; workers are closing their sockets and reporting");
                stopped = true;
                procs.iter_mut().for_each(|p| p.stdin = None);
            }
        }
    }
    for p in procs.iter_mut() {
        p.stdin = None;
        let _ = p.child.wait().await;
    }
    progress.show_ready(&agg, 0);

    let mut status = if stopped {
        Status::Aborted
    } else {
        Status::Completed
    };
    let mut summaries = Vec::new();
    for (w, p) in procs.iter().enumerate() {
        match &p.result {
            Some(r) => {
                if r.aborted {
                    status = status.worst(Status::Aborted);
                }
                summaries.push(WorkerSummary::from(r));
            }
            None => {
                agg.add_lost(p.players, "worker_lost");
                status = Status::Failed;
                summaries.push(WorkerSummary {
                    index: w as u64,
                    players: p.players,
                    source_ip: p.source_ip.map(|ip| ip.to_string()),
                    reported: false,
                    ..Default::default()
                });
            }
        }
    }
    let info = RunInfo {
        load_test_id: load_test_id.clone(),
        status,
        scenario: scenario.name.clone(),
        target: opts.target.clone(),
        started_at_ms,
        duration_s: wall_start.elapsed().as_secs_f64() - 1.5,
        workers: summaries,
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

/// Live progress: one line per completed second.
struct ProgressView {
    mode: Progress,
    players: u64,
    next: u64,
    started: u64,
    errors: u64,
}

impl ProgressView {
    fn new(mode: Progress, players: u64) -> Self {
        let mode = match mode {
            Progress::Auto if std::io::stderr().is_terminal() => Progress::Always,
            Progress::Auto => Progress::Never,
            m => m,
        };
        ProgressView {
            mode,
            players,
            next: 0,
            started: 0,
            errors: 0,
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
            let p99: BTreeMap<&str, f64> = sec
                .sketches
                .iter()
                .map(|(k, s)| (k.as_str(), s.quantile_micros(0.99) as f64 / 1000.0))
                .collect();
            match self.mode {
                Progress::Always => {
                    let lat: Vec<String> = p99.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
                    eprintln!(
                        "[{:>5}s] players {}/{} ccu {} arrivals/s {} sends/s {} errors/s {} (total {}) p99 ms: {}",
                        self.next,
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
                        "started": self.started,
                        "players": self.players,
                        "ccu": sec.ccu,
                        "arrivals": sec.counters.arrivals,
                        "sends": sec.counters.sends,
                        "errors": sec.counters.errors,
                        "errorsTotal": self.errors,
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
