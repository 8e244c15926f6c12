//! `muster autoscale run`: every second, read demand from Muster nodes' `/metrics`, let the
//! policy decide, and publish the desired replicas to KEDA (see [`crate::keda`]). Each decision
//! is logged as one JSON line: its inputs, its rule, why, and the replicas.
//!
//! A source that cannot be read is not taken for zero demand: the last decision holds, and the
//! log says so, until every source answers again.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::calendar::{Calendar, Event};
use crate::http::{Record, Shared};
use crate::keda::Desired;
use crate::policy::{Decision, Muster, MusterSettings, Observation, Policy, Sample, Unit};

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

    /// What the demand counts: a rate for requests; a gauge for the others, so that a decision
    /// reads `300.0 sockets rising 2.00 sockets/s`, not `/s` and `/s²`.
    pub fn unit(self) -> Unit {
        match self {
            Signal::Requests => Unit::PerSecond,
            Signal::Sockets => Unit::Count("sockets"),
            Signal::MatchmakerQueue => Unit::Count("tickets"),
            Signal::Rooms => Unit::Count("rooms"),
        }
    }
}

/// Demand from a Prometheus server's query API: `url` (e.g. `http://prometheus:9090`) and a
/// PromQL expression whose value is the demand (e.g. `sum(muster_sockets_open)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrometheusQuery {
    pub url: String,
    pub query: String,
}

/// What `muster autoscale run` needs.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Each node's metrics URL, e.g. `http://muster-0:7350/metrics`.
    pub sources: Vec<String>,
    /// Or a Prometheus server and a query whose value is the demand.
    pub prometheus: Option<PrometheusQuery>,
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
    /// Reading `sources` with `muster autoscale run`'s defaults: sockets, 18,000 a replica, a
    /// 70 % target, 1 to 100 replicas, 60 s to be ready, no calendar.
    pub fn new(sources: Vec<String>) -> RunSettings {
        RunSettings {
            sources,
            prometheus: None,
            metrics_token: None,
            signal: Signal::Sockets,
            units_per_replica: 18_000.0,
            target: 0.7,
            min_replicas: 1,
            max_replicas: 100,
            ready_s: 60,
            calendar: Calendar::default(),
            dry_run: false,
        }
    }

    /// Checks values no type rules out; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.sources.is_empty() == self.prometheus.is_none() {
            return Err(
                "give --source (each node's /metrics URL) or --prometheus-url with --query, not both"
                    .into(),
            );
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
        settings.unit = self.signal.unit();
        settings.calendar = self.calendar.clone();
        Muster::new(settings)
    }

    fn replicas(&self, units: f64) -> u64 {
        ((units / self.units_per_replica).ceil() as u64)
            .max(self.min_replicas)
            .min(self.max_replicas)
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
        // A sample that is not a finite number (NaN, +Inf) is not demand.
        let Some(value) = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite())
        else {
            continue;
        };
        *found.get_or_insert(0.0) += value;
    }
    found
}

/// Reads the signal from every source: its sum, or why it could not be read.
async fn read_sources(http: &reqwest::Client, settings: &RunSettings) -> Result<f64, String> {
    if let Some(prometheus) = &settings.prometheus {
        return read_prometheus(http, prometheus).await;
    }
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

/// The value of a Prometheus instant query: the sum of a vector's samples, or a scalar.
async fn read_prometheus(http: &reqwest::Client, source: &PrometheusQuery) -> Result<f64, String> {
    let url = format!("{}/api/v1/query", source.url.trim_end_matches('/'));
    let response = http
        .get(&url)
        .query(&[("query", source.query.as_str())])
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    let body: serde_json::Value = response.json().await.map_err(|e| format!("{url}: {e}"))?;
    query_value(&body).map_err(|problem| format!("{url}: {problem}"))
}

/// Reads an instant query's answer (`{"status":"success","data":{"resultType":…,"result":…}}`).
pub fn query_value(body: &serde_json::Value) -> Result<f64, String> {
    if body["status"] != "success" {
        return Err(format!("query failed: {}", body["error"]));
    }
    let number = |pair: &serde_json::Value| -> Result<f64, String> {
        pair[1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("not a number: {pair}"))
    };
    let result = &body["data"]["result"];
    match body["data"]["resultType"].as_str() {
        Some("scalar") => number(result),
        Some("vector") => result
            .as_array()
            .ok_or("vector result is not a list")?
            .iter()
            .map(|sample| number(&sample["value"]))
            .sum(),
        other => Err(format!(
            "the query must give a vector or a scalar, not {other:?}"
        )),
    }
}

/// The live loop's decision, apart from its reads and writes: one reading in, the replicas to
/// publish out. [`run`] drives it once a second on the wall clock; tests drive it on their own.
///
/// The policy is told that the replicas last published are the capacity, with nothing pending:
/// the loop cannot see pods start, and Kubernetes takes a new count at any time. So it is asked
/// afresh every second — which is why its trend must not read a jump as a slope (each second's
/// ask would top the last).
pub struct Decider {
    policy: Muster,
    settings: RunSettings,
}

impl Decider {
    pub fn new(settings: &RunSettings) -> Decider {
        Decider {
            policy: settings.policy(),
            settings: settings.clone(),
        }
    }

    /// The scheduled events, to add to.
    pub fn calendar_mut(&mut self) -> &mut Calendar {
        self.policy.calendar_mut()
    }

    /// `demand` read at `now_s` (unix seconds) while `current` replicas are published: the
    /// replicas to publish and the decision behind them, when they differ from `current`.
    pub fn decide(&mut self, now_s: u64, demand: f64, current: u64) -> Option<(u64, Decision)> {
        let observation = Observation {
            now_s,
            provisioned: current as f64 * self.settings.units_per_replica,
            pending: None,
            demand: Some(Sample {
                at_s: now_s,
                requested: demand,
            }),
            minute: None,
        };
        let decision = self.policy.decide(&observation);
        let replicas = self.settings.replicas(decision.desired?);
        (replicas != current).then_some((replicas, decision))
    }
}

/// What the run loop publishes and listens to; the other ends are [`Shared`] (the HTTP endpoint
/// and, through its `desired`, the gRPC service).
pub struct Outputs {
    desired: watch::Sender<Desired>,
    events: watch::Sender<Vec<Event>>,
    source_up: Arc<AtomicBool>,
    decisions: Arc<AtomicU64>,
    add_event: mpsc::Receiver<(Event, oneshot::Sender<Result<(), String>>)>,
    recent: Arc<std::sync::Mutex<std::collections::VecDeque<Record>>>,
}

/// The run loop's outputs and the endpoint's view of them, starting at `initial` replicas.
pub fn channels(
    initial: Desired,
    calendar: &Calendar,
    api_token: Option<String>,
) -> (Outputs, Shared) {
    let (desired, desired_seen) = watch::channel(initial);
    let (events, events_seen) = watch::channel(calendar.events().to_vec());
    let (add_event_tx, add_event) = mpsc::channel(16);
    let source_up = Arc::new(AtomicBool::new(false));
    let decisions = Arc::new(AtomicU64::new(0));
    let recent = Arc::default();
    let shared = Shared {
        recent: Arc::clone(&recent),
        desired: desired_seen,
        events: events_seen,
        source_up: source_up.clone(),
        decisions: decisions.clone(),
        add_event: add_event_tx,
        api_token,
    };
    (
        Outputs {
            desired,
            events,
            source_up,
            decisions,
            add_event,
            recent,
        },
        shared,
    )
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Runs until `stop` resolves: a decision a second, published on the outputs; events added
/// through the API join the policy's calendar.
pub async fn run(
    settings: RunSettings,
    mut outputs: Outputs,
    stop: impl std::future::Future<Output = ()>,
) {
    let desired = &outputs.desired;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(800))
        .build()
        .unwrap_or_default();
    let mut decider = Decider::new(&settings);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut previous_count: Option<(std::time::Instant, f64)> = None;
    let mut holding = false;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = &mut stop => return,
            Some((event, answer)) = outputs.add_event.recv() => {
                let added = decider.calendar_mut().add(event).map_err(|e| e.to_string());
                if added.is_ok() {
                    outputs.events.send_replace(decider.calendar_mut().events().to_vec());
                }
                let _ = answer.send(added);
                continue;
            }
        }
        let now = unix_now();
        let read = match read_sources(&http, &settings).await {
            Ok(read) => read,
            Err(error) => {
                if !holding {
                    let replicas = desired.borrow().replicas;
                    tracing::warn!(%error, replicas, "cannot read demand; holding the last decision");
                    Shared::remember(
                        &outputs.recent,
                        Record::source(
                            now,
                            "source_down",
                            format!("cannot read demand ({error}); holding the last decision"),
                            replicas,
                            settings.dry_run,
                        ),
                    );
                }
                holding = true;
                outputs.source_up.store(false, Ordering::Relaxed);
                previous_count = None;
                continue;
            }
        };
        if holding {
            tracing::info!("demand readable again");
            holding = false;
            let replicas = desired.borrow().replicas;
            Shared::remember(
                &outputs.recent,
                Record::source(
                    now,
                    "source_up",
                    "demand readable again".into(),
                    replicas,
                    settings.dry_run,
                ),
            );
        }
        outputs.source_up.store(true, Ordering::Relaxed);
        let demand = if settings.prometheus.is_none() && settings.signal.is_counter() {
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
        let Some((replicas, decision)) = decider.decide(now, demand, current) else {
            continue;
        };
        let record = Record {
            at: now,
            kind: "decision".into(),
            demand: Some(demand),
            rule: Some(decision.rule.to_owned()),
            why: decision.why,
            from_replicas: current,
            to_replicas: replicas,
            dry_run: settings.dry_run,
        };
        println!("{}", serde_json::to_string(&record).unwrap_or_default());
        Shared::remember(&outputs.recent, record);
        if !settings.dry_run {
            outputs.decisions.fetch_add(1, Ordering::Relaxed);
            desired.send_replace(Desired { replicas });
        }
    }
}

/// Serves KEDA's external scaler on `grpc` and the autoscaler's HTTP endpoint on `http`
/// ([`crate::http`]), and runs the decisions, until `shutdown` resolves. The replicas start at
/// `min_replicas`.
pub async fn serve(
    settings: RunSettings,
    grpc: tokio::net::TcpListener,
    http: tokio::net::TcpListener,
    api_token: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    settings.validate()?;
    let initial = Desired {
        replicas: settings.min_replicas.max(1),
    };
    let (outputs, shared) = channels(initial, &settings.calendar, api_token);
    let stop = CancellationToken::new();
    let cancel = stop.clone();
    tokio::spawn(async move {
        shutdown.await;
        cancel.cancel();
    });
    let scaler = crate::keda::Scaler::new(shared.desired.clone());
    let decisions = tokio::spawn(run(settings, outputs, stop.clone().cancelled_owned()));
    let endpoint_stop = stop.clone().cancelled_owned();
    let endpoint = tokio::spawn(async move {
        axum::serve(http, crate::http::router(shared))
            .with_graceful_shutdown(endpoint_stop)
            .await
    });
    let served = tonic::transport::Server::builder()
        .add_service(scaler.service())
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(grpc),
            stop.cancelled_owned(),
        )
        .await;
    let _ = decisions.await;
    let _ = endpoint.await;
    served.map_err(|e| format!("gRPC server: {e}"))
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
        assert_eq!(
            sum_metric(
                "muster_rooms NaN\nmuster_rooms 3\nmuster_rooms +Inf\n",
                "muster_rooms"
            ),
            Some(3.0)
        );
    }

    #[test]
    fn prometheus_answers() {
        let vector = serde_json::json!({"status": "success", "data": {"resultType": "vector",
            "result": [{"metric": {"pod": "a"}, "value": [1.0, "120"]}, {"metric": {"pod": "b"}, "value": [1.0, "30.5"]}]}});
        assert_eq!(query_value(&vector), Ok(150.5));
        let scalar = serde_json::json!({"status": "success", "data": {"resultType": "scalar", "result": [1.0, "7"]}});
        assert_eq!(query_value(&scalar), Ok(7.0));
        let failed = serde_json::json!({"status": "error", "error": "parse error"});
        assert!(query_value(&failed).unwrap_err().contains("parse error"));
        let matrix = serde_json::json!({"status": "success", "data": {"resultType": "matrix", "result": []}});
        assert!(query_value(&matrix)
            .unwrap_err()
            .contains("vector or a scalar"));
        let nan = serde_json::json!({"status": "success", "data": {"resultType": "scalar", "result": [1.0, "NaN"]}});
        assert!(query_value(&nan).is_err());
    }

    #[test]
    fn a_step_of_sockets_is_published_once_at_the_level() {
        // The finding: 300 sockets opened at once after a short history, then flat, at 50
        // sockets a replica and a 70 % target. The level needs ceil(300 / 0.7 / 50) = 9; reading
        // the jump as a trend published 1 → 25 → 35 → 41 → 45 → 46 in five seconds.
        let settings = RunSettings {
            units_per_replica: 50.0,
            ..RunSettings::new(vec!["http://node/metrics".into()])
        };
        let level_replicas = 9;
        for history in [12, 60, 600] {
            let mut decider = Decider::new(&settings);
            let mut replicas = 1;
            let mut published = Vec::new();
            let mut whys = Vec::new();
            for second in 0..history + 900 {
                let sockets = if second < history { 0.0 } else { 300.0 };
                if let Some((to, decision)) =
                    decider.decide(1_800_000_000 + second, sockets, replicas)
                {
                    replicas = to;
                    whys.push(decision.why);
                }
                published.push(replicas);
            }
            let after = &published[history as usize..];
            assert_eq!(
                after[0], level_replicas,
                "history {history}: at the first reading"
            );
            assert!(
                after.iter().all(|&r| r == level_replicas),
                "history {history}: held at the level for 15 minutes: {whys:#?}"
            );
            assert_eq!(whys.len(), 1, "history {history}: one change: {whys:#?}");
            assert!(
                whys[0].starts_with("demand 300.0 sockets")
                    && !whys[0].contains("300.0/s")
                    && !whys[0].contains("/s²"),
                "a count, not a rate: {}",
                whys[0]
            );
        }
    }

    #[test]
    fn settings_are_checked() {
        let good = RunSettings {
            max_replicas: 10,
            ..RunSettings::new(vec!["http://127.0.0.1:7350/metrics".into()])
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
        let both = RunSettings {
            prometheus: Some(PrometheusQuery {
                url: "http://prometheus:9090".into(),
                query: "sum(muster_sockets_open)".into(),
            }),
            ..good.clone()
        };
        assert!(both.validate().unwrap_err().contains("not both"));
        assert_eq!(good.replicas(40_000.0), 3);
        assert_eq!(good.replicas(1e12), 10);
    }
}
