//! `muster autoscale run`: every second, read demand from Muster nodes' `/metrics`, let the
//! policy decide, and publish the desired replicas to KEDA (see [`crate::keda`]). Each decision
//! is logged as one JSON line: its inputs, its rule, why, and the replicas.
//!
//! A source that cannot be read is not taken for zero demand: the last decision holds, and the
//! log says so, until every source answers again.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use crate::calendar::Calendar;
use crate::keda::Desired;
use crate::policy::{Muster, MusterSettings, Observation, Policy, Sample};

/// Which number of the nodes' metrics is demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Players connected: `muster_sockets_open`, summed over the nodes.
    Sockets,
    /// HTTP requests per second: the rate of `muster_http_request_duration_seconds_count`.
    Requests,
    /// Tickets waiting in the matchmaker: `muster_matchmaker_tickets`.
    MatchmakerQueue,
    /// Rooms alive: `muster_rooms`.
    Rooms,
}

impl Signal {
    pub fn parse(name: &str) -> Result<Signal, String> {
        match name {
            "sockets" => Ok(Signal::Sockets),
            "requests" => Ok(Signal::Requests),
            "matchmaker_queue" => Ok(Signal::MatchmakerQueue),
            "rooms" => Ok(Signal::Rooms),
            other => Err(format!(
                "unknown signal {other:?} (sockets, requests, matchmaker_queue, rooms)"
            )),
        }
    }

    fn metric(self) -> &'static str {
        match self {
            Signal::Sockets => "muster_sockets_open",
            Signal::Requests => "muster_http_request_duration_seconds_count",
            Signal::MatchmakerQueue => "muster_matchmaker_tickets",
            Signal::Rooms => "muster_rooms",
        }
    }

    /// A counter, whose rate is the demand (the others are levels).
    fn is_counter(self) -> bool {
        self == Signal::Requests
    }
}

/// What `muster autoscale run` needs.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Each node's metrics URL, e.g. `http://muster-0:7350/metrics`.
    pub sources: Vec<String>,
    /// Bearer token for the nodes' `/metrics` (their `metrics.token`), if set.
    pub metrics_token: Option<String>,
    pub signal: Signal,
    /// Demand one replica serves at 100 % (e.g. 18,000 sockets).
    pub units_per_replica: f64,
    /// Utilisation to provision for, in (0, 1].
    pub target: f64,
    pub min_replicas: u64,
    pub max_replicas: u64,
    /// How long a new replica takes to be ready, until the policy has seen one.
    pub ready_s: u64,
    pub calendar: Calendar,
    /// Decide and log, but never change the published replicas.
    pub dry_run: bool,
}

impl RunSettings {
    /// Checks values no type rules out; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.sources.is_empty() {
            return Err("give at least one --source (a node's /metrics URL)".into());
        }
        if !(self.target > 0.0 && self.target <= 1.0) {
            return Err("--target must be above 0 and at most 1".into());
        }
        if !(self.units_per_replica.is_finite() && self.units_per_replica > 0.0) {
            return Err("--units-per-replica must be a positive number".into());
        }
        if self.max_replicas == 0 || self.min_replicas > self.max_replicas {
            return Err("--max-replicas must be at least 1 and at least --min-replicas".into());
        }
        Ok(())
    }

    fn policy(&self) -> Muster {
        let mut settings = MusterSettings::new(self.target);
        settings.min = self.min_replicas as f64 * self.units_per_replica;
        settings.max = self.max_replicas as f64 * self.units_per_replica;
        settings.initial_ready_s = self.ready_s;
        settings.calendar = self.calendar.clone();
        Muster::new(settings)
    }

    fn replicas(&self, units: f64) -> u64 {
        ((units / self.units_per_replica).ceil() as u64).clamp(self.min_replicas, self.max_replicas)
    }
}

/// The sum of every sample of `metric` in a Prometheus text exposition (any labels).
pub fn sum_metric(text: &str, metric: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(metric) else {
            continue;
        };
        if !(rest.starts_with(' ') || rest.starts_with('{')) {
            continue;
        }
        let value = line.rsplit(' ').next()?.parse::<f64>().ok()?;
        *found.get_or_insert(0.0) += value;
    }
    found
}

/// Reads the signal from every source: its sum, or why it could not be read.
async fn read_sources(http: &reqwest::Client, settings: &RunSettings) -> Result<f64, String> {
    let mut total = 0.0;
    for source in &settings.sources {
        let mut request = http.get(source);
        if let Some(token) = &settings.metrics_token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| format!("{source}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{source}: HTTP {}", response.status()));
        }
        let text = response
            .text()
            .await
            .map_err(|e| format!("{source}: {e}"))?;
        total += sum_metric(&text, settings.signal.metric()).unwrap_or(0.0);
    }
    Ok(total)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Runs until `stop` resolves: a decision a second, published on `desired`.
pub async fn run(
    settings: RunSettings,
    desired: watch::Sender<Desired>,
    stop: impl std::future::Future<Output = ()>,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(800))
        .build()
        .unwrap_or_default();
    let mut policy = settings.policy();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut previous_count: Option<(std::time::Instant, f64)> = None;
    let mut holding = false;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = &mut stop => return,
        }
        let now = unix_now();
        let read = match read_sources(&http, &settings).await {
            Ok(read) => read,
            Err(error) => {
                if !holding {
                    tracing::warn!(%error, replicas = desired.borrow().replicas, "cannot read demand; holding the last decision");
                }
                holding = true;
                previous_count = None;
                continue;
            }
        };
        if holding {
            tracing::info!("demand readable again");
            holding = false;
        }
        let demand = if settings.signal.is_counter() {
            let at = std::time::Instant::now();
            let rate = previous_count.map(|(then, count)| {
                ((read - count) / at.duration_since(then).as_secs_f64()).max(0.0)
            });
            previous_count = Some((at, read));
            match rate {
                Some(rate) => rate,
                None => continue,
            }
        } else {
            read
        };
        let current = desired.borrow().replicas;
        let observation = Observation {
            now_s: now,
            provisioned: current as f64 * settings.units_per_replica,
            pending: None,
            demand: Some(Sample {
                at_s: now,
                requested: demand,
            }),
            minute: None,
        };
        let decision = policy.decide(&observation);
        let Some(units) = decision.desired else {
            continue;
        };
        let replicas = settings.replicas(units);
        if replicas == current {
            continue;
        }
        println!(
            "{}",
            serde_json::json!({
                "at": now,
                "demand": demand,
                "rule": decision.rule,
                "why": decision.why,
                "from_replicas": current,
                "to_replicas": replicas,
                "dry_run": settings.dry_run,
            })
        );
        if !settings.dry_run {
            desired.send_replace(Desired { replicas });
        }
    }
}

/// Serves KEDA's external scaler on `grpc` and runs the decisions until `shutdown` resolves.
/// The replicas start at `min_replicas`.
pub async fn serve(
    settings: RunSettings,
    grpc: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    settings.validate()?;
    let (desired, watching) = watch::channel(Desired {
        replicas: settings.min_replicas.max(1),
    });
    let stop = stop_on(shutdown);
    let decisions = tokio::spawn(run(settings, desired, stop.clone().wait()));
    let served = tonic::transport::Server::builder()
        .add_service(crate::keda::Scaler::new(watching).service())
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(grpc),
            stop.wait(),
        )
        .await;
    let _ = decisions.await;
    served.map_err(|e| format!("gRPC server: {e}"))
}

/// A shutdown signal many tasks can wait on.
#[derive(Clone)]
struct Stop(watch::Receiver<bool>);

impl Stop {
    async fn wait(mut self) {
        let _ = self.0.wait_for(|stopped| *stopped).await;
    }
}

fn stop_on(shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> Stop {
    let (tell, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = tell.send(true);
    });
    Stop(stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_a_metric_over_its_labels_and_nodes() {
        let text =
            "# HELP muster_sockets_open x\nmuster_sockets_open 12\nmuster_sockets_open_total 99\n\
                    muster_http_request_duration_seconds_count{route=\"/a\",status=\"200\"} 5\n\
                    muster_http_request_duration_seconds_count{route=\"/b\",status=\"200\"} 7\n";
        assert_eq!(sum_metric(text, "muster_sockets_open"), Some(12.0));
        assert_eq!(
            sum_metric(text, "muster_http_request_duration_seconds_count"),
            Some(12.0)
        );
        assert_eq!(sum_metric(text, "muster_rooms"), None);
    }

    #[test]
    fn settings_are_checked() {
        let good = RunSettings {
            sources: vec!["http://127.0.0.1:7350/metrics".into()],
            metrics_token: None,
            signal: Signal::Sockets,
            units_per_replica: 18_000.0,
            target: 0.7,
            min_replicas: 1,
            max_replicas: 10,
            ready_s: 60,
            calendar: Calendar::default(),
            dry_run: false,
        };
        assert!(good.validate().is_ok());
        assert!(RunSettings {
            target: -0.5,
            ..good.clone()
        }
        .validate()
        .unwrap_err()
        .contains("--target"));
        assert!(RunSettings {
            sources: vec![],
            ..good.clone()
        }
        .validate()
        .unwrap_err()
        .contains("--source"));
        assert!(RunSettings {
            min_replicas: 5,
            max_replicas: 2,
            ..good.clone()
        }
        .validate()
        .is_err());
        assert!(Signal::parse("ccu").unwrap_err().contains("unknown signal"));
        assert_eq!(good.replicas(40_000.0), 3);
        assert_eq!(good.replicas(1e12), 10);
    }
}
