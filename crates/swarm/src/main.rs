//! The `swarm` command line: parses flags and calls the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use swarm::report::{Report, Status};
use swarm::run::coordinator::{self, Progress, RunOptions, SourceIps};
use swarm::run::listen::ListenOptions;

/// Load-test harness for servers speaking Nakama's client API (Muster, Nakama).
#[derive(Parser)]
#[command(name = "swarm", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run a scenario against a server and write report.json and report.html.
    Run {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Multiply the scenario's players, arrival rates and chat rooms by this factor (e.g.
        /// 0.01 to run a seed scenario at 1/100 of its size on one machine).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Base URL of the server; several, comma-separated, spread the workers over them
        /// (worker n plays against the (n mod count)-th).
        #[arg(long, default_value = "http://127.0.0.1:7350")]
        target: String,
        /// The servers' gRPC addresses (`host:port`, comma-separated as --target) for steps with
        /// `api = "grpc"`; default: each target's port less one (Nakama's convention).
        #[arg(long)]
        grpc_target: Option<String>,
        /// Local worker processes (default: enough to keep each under its open-file limit).
        #[arg(long)]
        workers: Option<u64>,
        /// Remote workers (`swarm worker --listen`) instead of local ones: `host:port` entries,
        /// comma-separated; a name resolving to several addresses (a Kubernetes headless
        /// Service) means all of them.
        #[arg(long, value_delimiter = ',')]
        workers_at: Vec<String>,
        /// With --workers-at: wait until the names resolve to at least this many workers.
        #[arg(long)]
        expect_workers: Option<u64>,
        /// How long to wait for --expect-workers.
        #[arg(long, default_value_t = 120)]
        discover_timeout_s: u64,
        /// The shared token the remote workers were started with.
        #[arg(long, env = "SWARM_WORKER_TOKEN", hide_env_values = true)]
        worker_token: Option<String>,
        /// A worker that sends nothing for this long during the run is lost (its players count
        /// as failed) and the run goes on without it.
        #[arg(long, default_value_t = 15)]
        worker_silence_s: u64,
        /// Directory for the report (default: swarm-out/<loadTestId>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Server key sent as the HTTP Basic user of authenticate requests.
        #[arg(long, default_value = "defaultkey", env = "SWARM_SERVER_KEY")]
        server_key: String,
        /// Source addresses for worker sockets: auto (127.0.0.2.. on loopback targets), none,
        /// or a comma-separated list.
        #[arg(long, default_value = "auto")]
        source_ips: SourceIps,
        /// Run only shard K of N of the players ("K/N"), to split one load test over machines;
        /// merge the reports with `swarm merge`.
        #[arg(long, default_value = "0/1", value_parser = parse_shard)]
        shard: (u64, u64),
        /// Live progress on stderr.
        #[arg(long, value_enum, default_value = "auto")]
        progress: Progress,
    },
    /// Merge reports from several machines (shards of one run) into one report.
    Merge {
        /// report.json files written by `swarm run`.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Directory for the merged report.
        #[arg(long, default_value = "swarm-out/merged")]
        out: PathBuf,
    },
    /// Check a scenario file and print its schedule.
    Check {
        scenario: PathBuf,
        /// Check it as `swarm run --scale` would run it.
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
    },
    /// Print latency percentiles (p50/p95/p99) and rates over seconds [FROM, TO) of a run, as
    /// JSON, merged from the report's per-second sketches (e.g. a steady hold, without the ramp).
    Window {
        /// A report.json written by `swarm run`.
        report: PathBuf,
        #[arg(long)]
        from_s: u64,
        #[arg(long)]
        to_s: u64,
    },
    /// A worker. Without --listen: the child process `swarm run` starts (internal). With
    /// --listen: a worker on this machine for a coordinator elsewhere (`swarm run --workers-at`).
    Worker {
        /// Listen for a coordinator on this address, e.g. 0.0.0.0:7400.
        #[arg(long)]
        listen: Option<String>,
        /// The shared token a coordinator must present (at least 16 characters).
        #[arg(long, env = "SWARM_WORKER_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Exit after one run (a Kubernetes Job's pod).
        #[arg(long)]
        once: bool,
    },
}

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (k, n) = s.split_once('/').ok_or("expected K/N, e.g. 0/4")?;
    let k = k.parse().map_err(|_| format!("bad shard index {k}"))?;
    let n = n.parse().map_err(|_| format!("bad shard count {n}"))?;
    Ok((k, n))
}

/// Exit status: 0 when the run completed with no failed player, 3 when players failed or the
/// run did not complete, 1 on errors (bad scenario, cannot start workers).
fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("swarm: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn finish(report: &Report, dir: &std::path::Path) -> ExitCode {
    print!("{}", report.summary_text());
    println!(
        "report: {} and {}",
        dir.join("report.json").display(),
        dir.join("report.html").display()
    );
    if report.failed == 0 && report.status == Status::Completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    }
}

fn real_main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Worker {
            listen: None,
            token: _,
            once: _,
        } => {
            swarm::run::worker::main_stdio()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker {
            listen: Some(listen),
            token,
            once,
        } => {
            swarm::run::listen::main(ListenOptions {
                listen,
                token: token.unwrap_or_default(),
                once,
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { scenario, scale } => {
            let s = swarm::scenario::Scenario::load(&scenario)?.scaled(scale)?;
            let sched = s.schedule();
            println!(
                "{}: {} players over {:.1} s",
                s.name,
                sched.total_players(),
                sched.duration_s()
            );
            for p in &sched.phases {
                println!(
                    "  {:>8.1}s  {:<12} {:>8.1} s  {:>8} players  {:?} (peak {:.2})",
                    p.start_s, p.name, p.duration_s, p.players, p.curve.shape, p.curve.peak
                );
            }
            let steps: Vec<&str> = s.steps.iter().map(|st| st.name()).collect();
            println!("  steps: {}", steps.join(" → "));
            Ok(ExitCode::SUCCESS)
        }
        Command::Window {
            report,
            from_s,
            to_s,
        } => {
            let report = Report::read(&report)?;
            let window = swarm::report::window::window(&report, from_s, to_s)?;
            println!("{}", serde_json::to_string_pretty(&window)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Merge { reports, out } => {
            let reports = reports
                .iter()
                .map(|p| Report::read(p))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let merged = Report::merge(&reports)?;
            merged.write(&out)?;
            Ok(finish(&merged, &out))
        }
        Command::Run {
            scenario,
            scale,
            target,
            grpc_target,
            workers,
            workers_at,
            expect_workers,
            discover_timeout_s,
            worker_token,
            worker_silence_s,
            out,
            server_key,
            source_ips,
            shard,
            progress,
        } => {
            let exe = std::env::current_exe()?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (report, dir) = runtime.block_on(coordinator::run(RunOptions {
                scenario,
                scale,
                target,
                grpc_target,
                workers,
                workers_at,
                expect_workers,
                discover_timeout: Duration::from_secs(discover_timeout_s),
                worker_token,
                worker_silence: Duration::from_secs(worker_silence_s),
                out,
                server_key,
                source_ips,
                shard,
                progress,
                exe,
            }))?;
            Ok(finish(&report, &dir))
        }
    }
}
