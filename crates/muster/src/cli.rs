//! The `muster` command line: flags, settings, logging, the open-file limit, the async runtime,
//! and every command (`serve`, `migrate`, `config`, `world`, `autoscale`). The `muster` binary is
//! [`main_with`] with no game logic of its own; a studio's binary calls it with its own
//! (docs/extending.md) and keeps all of the above.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::app::GameLogic;
use crate::config::{Config, EXAMPLE_TOML};

#[derive(Parser)]
#[command(
    name = "muster",
    version,
    about = "A realtime multiplayer game backend speaking Nakama's client API"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    settings: Settings,
}

// Parsed once at start: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API and realtime sockets (the default).
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Write a consistent copy of the SQLite database to FILE, while the server runs or not
    /// (docs/deploy.md); prints its size as JSON.
    Backup {
        /// Where to write the copy (must not exist).
        file: PathBuf,
    },
    /// Print every setting with its default and documentation.
    Config,
    /// Capacity autoscaling (docs/autoscaling.md).
    Autoscale {
        #[command(subcommand)]
        command: AutoscaleCommand,
    },
    /// The persistent world (docs/world.md).
    World {
        #[command(subcommand)]
        command: WorldCommand,
    },
    /// The JavaScript module (docs/runtime.md).
    Runtime {
        #[command(subcommand)]
        command: RuntimeCommand,
    },
    /// Runs one game server of the fleet (Muster's own use; see docs/fleet.md).
    #[command(hide = true)]
    FleetExec {
        /// Muster's process id: the game server dies with it.
        #[arg(long)]
        parent: u32,
        /// The game server's command and arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Subcommand)]
enum RuntimeCommand {
    /// Load the module's bundle again on a running server (as SIGHUP does): new calls and new
    /// matches use it, running matches keep theirs; a bundle that does not load is refused and
    /// its error printed. Uses the settings' `listen` address and `runtime.http_key`.
    Reload {
        /// The server's base URL, when not the settings' `listen` address (e.g.
        /// `http://10.0.0.5:7350`).
        #[arg(long)]
        server: Option<String>,
    },
}

#[derive(Subcommand)]
enum WorldCommand {
    /// Seed every shard (NPC towers and creeps per `world.seed_towers_per_shard`) and write
    /// their checkpoints, without serving; prints what was seeded as JSON.
    Seed {
        /// Replace checkpoints that exist.
        #[arg(long)]
        force: bool,
    },
    /// Print what each shard's checkpoint holds, as JSON (read and checked, not restored).
    Stats,
    /// With the server stopped: fold each shard's action log into a new checkpoint (restore,
    /// replay the actions, write) and delete the log segments it covers; prints JSON.
    Checkpoint,
}

#[derive(Subcommand)]
enum AutoscaleCommand {
    /// Reproduce Space Ape's DynamoDB experiment: every policy on the bell-curve and top-heavy
    /// traces at utilisation targets 30-80 %; prints the table (or JSON) and can write charts.
    Simulate(SimulateArgs),
    /// Run the autoscaler: read demand from the nodes' /metrics every second, decide, and serve
    /// KEDA's external scaler (gRPC) with the desired replicas. One JSON line per decision.
    Run(RunArgs),
}

#[derive(Args)]
struct RunArgs {
    /// A node's metrics URL, e.g. http://muster-0.muster:7350/metrics (repeat for each node).
    #[arg(long = "source")]
    sources: Vec<String>,
    /// Or read demand from a Prometheus server's query API (with --query).
    #[arg(long, requires = "query")]
    prometheus_url: Option<String>,
    /// The PromQL expression whose value is the demand, e.g. 'sum(muster_sockets_open)'.
    #[arg(long, requires = "prometheus_url")]
    query: Option<String>,
    /// Bearer token for the nodes' /metrics (their metrics.token).
    #[arg(long, env = "AUTOSCALE_METRICS_TOKEN", hide_env_values = true)]
    metrics_token: Option<String>,
    /// What demand is: sockets, requests (per second), matchmaker_queue or rooms.
    #[arg(long, default_value = "sockets")]
    signal: String,
    /// Demand one replica serves at 100 % (e.g. sockets per node).
    #[arg(long, default_value_t = 18_000.0)]
    units_per_replica: f64,
    /// Utilisation to provision for, above 0 and at most 1.
    #[arg(long, default_value_t = 0.7)]
    target: f64,
    #[arg(long, default_value_t = 1)]
    min_replicas: u64,
    #[arg(long, default_value_t = 100)]
    max_replicas: u64,
    /// Seconds a new replica takes to be ready (the lead for scheduled events).
    #[arg(long, default_value_t = 60)]
    ready_s: u64,
    /// Scheduled events (TOML, docs/autoscaling.md), times in unix seconds.
    #[arg(long)]
    calendar: Option<PathBuf>,
    /// Address of the KEDA external scaler (gRPC).
    #[arg(long, default_value = "0.0.0.0:7360")]
    grpc_listen: String,
    /// Address of the HTTP endpoint: /metrics (desired replicas) and the events API.
    #[arg(long, default_value = "0.0.0.0:7361")]
    http_listen: String,
    /// Bearer token of the events API (GET/POST /events); without it the API is off.
    #[arg(long, env = "AUTOSCALE_API_TOKEN", hide_env_values = true)]
    api_token: Option<String>,
    /// Decide and log, but keep publishing the starting replicas.
    #[arg(long)]
    dry_run: bool,
}

/// `muster runtime reload`: asks the server to reload its module; prints what it registered.
async fn runtime_reload(config: &Config, server: Option<&str>) -> anyhow::Result<()> {
    let base = match server {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => format!("http://{}", config.listen.replace("0.0.0.0", "127.0.0.1")),
    };
    let response = reqwest::Client::new()
        .post(format!("{base}/v2/runtime/reload"))
        .basic_auth(&config.runtime.http_key, Some(""))
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach {base}: {e}"))?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if status.is_success() {
        println!("{body}");
        Ok(())
    } else {
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_owned))
            .unwrap_or(body);
        Err(anyhow::anyhow!(
            "the reload was refused ({status}): {message}"
        ))
    }
}

/// `muster autoscale run`.
fn autoscale_run(args: &RunArgs) -> Result<(), String> {
    use muster_autoscaler::calendar::Calendar;
    use muster_autoscaler::run::{serve, PrometheusQuery, RunSettings, Signal};
    let calendar = match &args.calendar {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            Calendar::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => Calendar::default(),
    };
    let settings = RunSettings {
        prometheus: args
            .prometheus_url
            .clone()
            .zip(args.query.clone())
            .map(|(url, query)| PrometheusQuery { url, query }),
        metrics_token: args.metrics_token.clone(),
        signal: Signal::parse(&args.signal)?,
        units_per_replica: args.units_per_replica,
        target: args.target,
        min_replicas: args.min_replicas,
        max_replicas: args.max_replicas,
        ready_s: args.ready_s,
        calendar,
        dry_run: args.dry_run,
        ..RunSettings::new(args.sources.clone())
    };
    settings.validate()?;
    crate::app::init_logging("info", Default::default());
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let bind = |address: String, flag: &'static str| async move {
            tokio::net::TcpListener::bind(&address)
                .await
                .map_err(|e| format!("cannot listen on {address} ({flag}): {e}"))
        };
        let grpc = bind(args.grpc_listen.clone(), "--grpc-listen").await?;
        let http = bind(args.http_listen.clone(), "--http-listen").await?;
        tracing::info!(grpc = %args.grpc_listen, http = %args.http_listen, dry_run = args.dry_run, "autoscaler serving KEDA's external scaler");
        serve(
            settings,
            grpc,
            http,
            args.api_token.clone(),
            crate::app::termination(),
        )
        .await
    })
}

#[derive(Args)]
struct SimulateArgs {
    /// Write an HTML page of charts (provisioned, requested, consumed, throttled) here.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Print the runs as JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Seconds before a change of capacity takes effect.
    #[arg(long, default_value_t = 60)]
    apply_delay_s: u64,
    /// Seconds after a minute closes that its CloudWatch-style metric is seen.
    #[arg(long, default_value_t = 180)]
    metric_lag_s: u64,
    /// Seconds late the per-second demand signal is seen.
    #[arg(long, default_value_t = 5)]
    signal_lag_s: u64,
    /// Seconds of unused capacity kept as burst credit (DynamoDB: up to 300, best effort).
    #[arg(long, default_value_t = 0.0)]
    burst_window_s: f64,
    /// Capacity at the start, units per second.
    #[arg(long, default_value_t = 50.0)]
    initial_capacity: f64,
}

/// `muster autoscale simulate`.
fn simulate(args: &SimulateArgs) -> Result<(), String> {
    use muster_autoscaler::simulate::{report, Model};
    if !(args.burst_window_s.is_finite() && args.burst_window_s >= 0.0) {
        return Err("--burst-window-s must be 0 or more".into());
    }
    if !(args.initial_capacity.is_finite() && args.initial_capacity > 0.0) {
        return Err("--initial-capacity must be more than 0".into());
    }
    let model = Model {
        initial_capacity: args.initial_capacity,
        apply_delay_s: args.apply_delay_s,
        metric_lag_s: args.metric_lag_s,
        signal_lag_s: args.signal_lag_s,
        burst_window_s: args.burst_window_s,
    };
    let cells = report::experiment(&model);
    if args.json {
        println!("{:#}", report::json(&cells));
    } else {
        print!("{}", report::table(&cells));
    }
    if let Some(path) = &args.html {
        std::fs::write(path, report::html(&cells, &[0.7, 0.8]))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("charts: {}", path.display());
    }
    Ok(())
}

/// The settings most often given on the command line; every other one is set in the config file
/// or by environment (see `muster config`).
#[derive(Args)]
struct Settings {
    /// Configuration file (TOML).
    #[arg(long, short, env = "MUSTER_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Address to listen on, e.g. 127.0.0.1:7350.
    #[arg(long, global = true)]
    listen: Option<String>,
    /// Directory for the embedded SQLite database.
    #[arg(long, global = true)]
    data_dir: Option<String>,
    /// PostgreSQL URL (postgres://...); SQLite in data_dir when absent.
    #[arg(long, global = true)]
    database_url: Option<String>,
    /// Server key clients authenticate with.
    #[arg(long, global = true)]
    server_key: Option<String>,
    /// Log filter, e.g. info or muster=debug.
    #[arg(long, global = true)]
    log: Option<String>,
}

impl Settings {
    fn overrides(&self) -> Vec<(&'static str, String)> {
        [
            ("listen", &self.listen),
            ("data_dir", &self.data_dir),
            ("database_url", &self.database_url),
            ("server_key", &self.server_key),
            ("log", &self.log),
        ]
        .into_iter()
        .filter_map(|(key, value)| value.clone().map(|v| (key, v)))
        .collect()
    }
}

/// Runs the command line given to this process, serving `game` (the studio's match handlers and
/// server functions) when the command is `serve` or none; returns the process's exit code.
pub fn main_with(game: GameLogic) -> ExitCode {
    run(Cli::parse(), game)
}

/// [`main_with`] on the given command line (`args[0]` is the program's name) instead of the
/// process's: a bad command line prints clap's message and answers exit code 2.
pub fn main_with_args<I, T>(args: I, game: GameLogic) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::try_parse_from(args) {
        Ok(cli) => run(cli, game),
        Err(error) => {
            let _ = error.print();
            ExitCode::from(2)
        }
    }
}

/// Whether `args` (`args[0]` is the program's name) is a valid `muster` command line, without
/// running it; clap's message when it is not.
pub fn check_args<I, T>(args: I) -> Result<(), String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    Cli::try_parse_from(args)
        .map(drop)
        .map_err(|error| error.to_string())
}

fn run(cli: Cli, game: GameLogic) -> ExitCode {
    match &cli.command {
        Some(Command::Config) => {
            print!("{EXAMPLE_TOML}");
            return ExitCode::SUCCESS;
        }
        Some(Command::FleetExec { parent, command }) => {
            let why = crate::rooms::fleet::exec::become_game_server(*parent, command);
            eprintln!("muster fleet-exec: {why}");
            return ExitCode::from(127);
        }
        Some(Command::Autoscale { command }) => {
            let (name, result) = match command {
                AutoscaleCommand::Simulate(args) => ("simulate", simulate(args)),
                AutoscaleCommand::Run(args) => ("run", autoscale_run(args)),
            };
            return match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("muster autoscale {name}: {error}");
                    ExitCode::from(2)
                }
            };
        }
        _ => {}
    }
    let config = match Config::load(cli.settings.config.as_deref(), &cli.settings.overrides()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("muster: configuration error: {error}");
            return ExitCode::from(2);
        }
    };
    if let Some(Command::World { command }) = &cli.command {
        let result = match command {
            WorldCommand::Seed { force } => {
                crate::world::seed_offline(&config.world, &config.data_dir, *force)
            }
            WorldCommand::Stats => crate::world::stats_offline(&config.world, &config.data_dir),
            WorldCommand::Checkpoint => {
                crate::world::checkpoint_offline(&config.world, &config.data_dir)
            }
        };
        return match result {
            Ok(json) => {
                println!("{json:#}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("muster world: {error:#}");
                ExitCode::from(2)
            }
        };
    }
    crate::app::init_logging(&config.log, config.log_format);
    // Every socket is a file: take the whole allowance the system grants (soft up to hard).
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "open file limit"),
        Err(error) => tracing::warn!(%error, "cannot raise the open file limit"),
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if config.worker_threads > 0 {
        builder.worker_threads(config.worker_threads);
    }
    let runtime = match builder.build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("muster: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Some(Command::Migrate) => {
                let (applied, version) = crate::services::migrate(&config).await?;
                println!("applied {applied} migration(s); schema at version {version}");
                Ok(())
            }
            Some(Command::Backup { file }) => {
                let bytes = crate::store::backup(&config.store(), &file).await?;
                println!(
                    "{}",
                    serde_json::json!({ "backup": file.display().to_string(), "bytes": bytes })
                );
                Ok(())
            }
            Some(Command::Runtime {
                command: RuntimeCommand::Reload { server },
            }) => runtime_reload(&config, server.as_deref()).await,
            _ => crate::app::serve_with(config, game).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("muster: {error:#}");
            ExitCode::FAILURE
        }
    }
}
