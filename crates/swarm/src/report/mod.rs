//! The final report: JSON in the shape of Space Ape's load-test aggregator, plus time series and
//! the sketches needed to merge reports from several machines.
//!
//! The first five keys are exactly that aggregator's (`loadTestId`, `status`, `successful`,
//! `failed`, `metrics` with `count`, `min`, `max`, `percentile80` … `percentile99point99`, in
//! milliseconds); everything after them is ours. `sketches` and each second's `sketches` carry the
//! mergeable histograms, so `swarm merge` recomputes exact merged percentiles instead of averaging
//! them.
//!
//! The whole-run figures (`metrics`, `counters`, `errors`) are the sum of the seconds every
//! worker streamed, so they always agree with the `timeseries` (and `swarm window` over the whole
//! run); `workers[].counts` splits them by worker. A worker lost or stalled before its final
//! result contributed what it streamed until then: it is listed in `partialWorkers`.
//!
//! This folder is the top layer that reads what a run measured: the report file itself (here),
//! its self-contained HTML page ([`html`]) and slices of a finished run's time series
//! ([`window`], for `swarm window`).

pub mod html;
pub mod window;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::measure::sketch::{MetricSummary, Precision, Sketch, SketchError};
use crate::measure::stats::{Aggregate, Counters, SecondAgg, WorkerResult};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    /// Every phase ran to its end and every worker reported.
    Completed,
    /// Stopped early (Ctrl-C); players that never started are counted in `skipped`.
    Aborted,
    /// A worker was lost; its players are counted as failed (`worker_lost`).
    Failed,
}

impl Status {
    /// The worse of two statuses, for merging.
    pub fn worst(self, o: Status) -> Status {
        use Status::*;
        match (self, o) {
            (Failed, _) | (_, Failed) => Failed,
            (Aborted, _) | (_, Aborted) => Aborted,
            _ => Completed,
        }
    }
}

/// One row of the per-second time series.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SecondRow {
    /// Seconds since the run start.
    pub t: u64,
    /// Open realtime sockets at the end of the second.
    pub ccu: u64,
    pub arrivals: u64,
    pub sends: u64,
    pub receives: u64,
    pub connects: u64,
    pub disconnects: u64,
    pub errors: u64,
    /// Chat messages sent during the second.
    pub chat_sent: u64,
    /// Chat messages received by members during the second.
    pub chat_delivered: u64,
    /// Median latency of the second, ms, by metric.
    pub p50: BTreeMap<String, f64>,
    /// 99th percentile latency of the second, ms, by metric.
    pub p99: BTreeMap<String, f64>,
    /// CPU seconds all workers used during the second.
    pub worker_cpu_s: f64,
    /// Total resident memory of all workers at the end of the second, KiB.
    pub worker_rss_kb: u64,
    /// Samples recorded during the second, by metric (the window sketches' counts; over all
    /// seconds they add up to the whole-run `metrics[].count`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
    /// Mergeable window sketches of the second.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sketches: BTreeMap<String, String>,
}

/// How a worker's part of the run ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WorkerStatus {
    /// It sent its final result: every sample it measured is in the report.
    #[default]
    Finished,
    /// Its connection ended (it was killed, its machine went away, it failed) before its final
    /// result: the report holds what it streamed until then.
    Lost,
    /// It went silent for `--worker-silence-s` and was given up on: the report holds what it
    /// streamed until then, and nothing it sent afterwards.
    Stalled,
}

impl WorkerStatus {
    pub fn name(self) -> &'static str {
        match self {
            WorkerStatus::Finished => "finished",
            WorkerStatus::Lost => "lost",
            WorkerStatus::Stalled => "stalled",
        }
    }
}

/// Resource use of one worker process.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkerSummary {
    pub index: u64,
    pub players: u64,
    pub source_ip: Option<String>,
    pub peak_ccu: u64,
    pub rss_baseline_kb: u64,
    pub rss_peak_kb: u64,
    pub cpu_s: f64,
    /// False when the worker died before reporting.
    pub reported: bool,
    /// `finished`, or `lost`/`stalled` when it was given up on before its final result (its
    /// figures are then those of the seconds it streamed).
    pub status: WorkerStatus,
    /// Samples it contributed to the whole-run `metrics`, by metric: over all workers they add
    /// up to each metric's `count`.
    pub counts: BTreeMap<String, u64>,
    /// Seconds of the run it streamed (its figures cover `[0, streamedS)`; the last one of a
    /// finished worker holds its teardown).
    pub streamed_s: u64,
    /// Address of a remote worker (absent for local ones).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Its players that finished every step, and that failed (all of them when it was lost).
    pub successful: u64,
    pub failed: u64,
    /// Why it was lost, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
    /// How late it woke for the run's start instant, ms.
    pub start_late_ms: Option<f64>,
    /// Its clock minus the coordinator's, ms, and the round trip that was timed over.
    pub clock_offset_ms: Option<f64>,
    pub clock_rtt_ms: Option<f64>,
}

impl From<&WorkerResult> for WorkerSummary {
    fn from(r: &WorkerResult) -> Self {
        WorkerSummary {
            index: r.index,
            players: r.players,
            source_ip: r.source_ip.clone(),
            peak_ccu: r.peak_ccu,
            rss_baseline_kb: r.rss_baseline_kb,
            rss_peak_kb: r.rss_peak_kb,
            cpu_s: r.cpu_s,
            reported: true,
            successful: r.successful,
            failed: r.failed,
            ..Default::default()
        }
    }
}

/// One phase of the schedule and what the run achieved during it.
///
/// A load test with an arrival rate asks "how many per second did the server actually take?";
/// latency percentiles and totals do not say, and a whole-run average is diluted by the ramp and
/// the teardown. So each phase gets its own rates: every sample recorded while the phase ran,
/// per second of the phase. A latency sample is recorded only when the request succeeded, so
/// `ratesPerS.auth` is successful authentications per second, `ratesPerS.connect` sockets
/// opened per second, `ratesPerS.rpc_<id>` answered calls per second.
///
/// The report's time series has one row per second, so a row that straddles a phase boundary is
/// shared between the two phases in proportion to the time each covers (samples are taken as
/// spread evenly over their second). Phases on whole seconds, the usual case, need no sharing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PhaseSummary {
    pub name: String,
    /// When the phase starts, seconds since the run start.
    pub start_s: f64,
    pub duration_s: f64,
    /// Players that arrived per second of the phase (the offered arrival rate, as it happened).
    pub arrivals_per_s: f64,
    /// Samples recorded per second of the phase, by metric (successful requests per second).
    pub rates_per_s: BTreeMap<String, f64>,
}

impl PhaseSummary {
    /// A phase of the schedule, its rates still to be measured.
    pub fn planned(name: &str, start_s: f64, duration_s: f64) -> PhaseSummary {
        PhaseSummary {
            name: name.to_string(),
            start_s,
            duration_s,
            ..Default::default()
        }
    }

    /// This phase with its rates computed from the aggregate's per-second rows.
    fn measured(&self, seconds: &BTreeMap<u64, SecondAgg>) -> PhaseSummary {
        let (start, end) = (self.start_s, self.start_s + self.duration_s);
        let mut arrivals = 0.0;
        let mut samples: BTreeMap<String, f64> = BTreeMap::new();
        for (t, sec) in seconds {
            let share = overlap(*t, start, end);
            if share <= 0.0 {
                continue;
            }
            arrivals += sec.counters.arrivals as f64 * share;
            for (name, sketch) in &sec.sketches {
                *samples.entry(name.clone()).or_insert(0.0) += sketch.count() as f64 * share;
            }
        }
        let per_s = |n: f64| {
            if self.duration_s > 0.0 {
                round2(n / self.duration_s)
            } else {
                0.0
            }
        };
        PhaseSummary {
            name: self.name.clone(),
            start_s: self.start_s,
            duration_s: self.duration_s,
            arrivals_per_s: per_s(arrivals),
            rates_per_s: samples.into_iter().map(|(k, n)| (k, per_s(n))).collect(),
        }
    }
}

/// How much of second `[t, t + 1)` lies inside `[start, end)`, from 0 to 1.
fn overlap(t: u64, start: f64, end: f64) -> f64 {
    let (from, to) = (t as f64, t as f64 + 1.0);
    (to.min(end) - from.max(start)).max(0.0)
}

/// Rounded to hundredths, so rates read as 4999.87 rather than 4999.866666666667.
fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The report file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub load_test_id: String,
    pub status: Status,
    /// Players that went through their steps without a failure.
    pub successful: u64,
    /// Players that hit a failure (each counted once, at its first failure).
    pub failed: u64,
    pub metrics: BTreeMap<String, MetricSummary>,
    /// Players the schedule had: successful + failed + skipped.
    pub players: u64,
    /// Players that never started (run stopped early).
    pub skipped: u64,
    pub scenario: String,
    pub target: String,
    /// Unix time of the run start, milliseconds.
    pub started_at_ms: u64,
    /// Wall-clock seconds from the run start to the last worker's result.
    pub duration_s: f64,
    pub peak_ccu: u64,
    /// The schedule's phases, with the arrival rate and request rates achieved in each (absent
    /// from reports written before they were added).
    #[serde(default)]
    pub phases: Vec<PhaseSummary>,
    pub counters: Counters,
    /// Failures by kind: `http_<status>`, `http_connect`, `http_timeout`, `ws_http_<status>`,
    /// `ws_close_<code>`, `ws_eof`, `ping_timeout`, `unfinished`, `worker_lost`, …
    pub errors: BTreeMap<String, u64>,
    pub workers: Vec<WorkerSummary>,
    /// Indices of the workers given up on before their final result (`status` `lost` or
    /// `stalled`): every whole-run figure and every second holds their samples, counters and
    /// failures up to the last second they streamed (`streamedS`), and nothing after it; their
    /// players count as failed. Empty when every worker finished.
    #[serde(default)]
    pub partial_workers: Vec<u64>,
    /// Spread of the workers' wake-ups for the common start instant, ms (how late the latest
    /// woke, less how late the earliest did).
    #[serde(default)]
    pub start_skew_ms: Option<f64>,
    /// How far the clocks of the workers may be off the coordinator's, ms (half the longest
    /// round trip their offsets were timed over): the skew is exact to within it.
    #[serde(default)]
    pub clock_uncertainty_ms: Option<f64>,
    /// The coordinator's peak resident memory, KiB.
    #[serde(default)]
    pub coordinator_rss_peak_kb: u64,
    pub timeseries: Vec<SecondRow>,
    /// Mergeable whole-run sketches, by metric.
    pub sketches: BTreeMap<String, String>,
}

/// Run facts that do not come from the aggregate.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub load_test_id: String,
    pub status: Status,
    pub scenario: String,
    pub target: String,
    pub started_at_ms: u64,
    pub duration_s: f64,
    pub workers: Vec<WorkerSummary>,
    pub start_skew_ms: Option<f64>,
    pub clock_uncertainty_ms: Option<f64>,
    pub coordinator_rss_peak_kb: u64,
    /// The schedule's phases (name, start, duration); their rates are measured by
    /// [`Report::build`].
    pub phases: Vec<PhaseSummary>,
}

impl Report {
    /// Builds the report from everything aggregated.
    pub fn build(info: RunInfo, agg: &Aggregate) -> Report {
        let ms = |s: &Sketch, q: f64| s.quantile_micros(q) as f64 / 1000.0;
        let timeseries: Vec<SecondRow> = agg
            .seconds
            .iter()
            .map(|(t, sec)| SecondRow {
                t: *t,
                ccu: sec.ccu,
                arrivals: sec.counters.arrivals,
                sends: sec.counters.sends,
                receives: sec.counters.receives,
                connects: sec.counters.connects,
                disconnects: sec.counters.disconnects,
                errors: sec.counters.errors,
                chat_sent: sec.counters.chat_sent,
                chat_delivered: sec.counters.chat_delivered,
                p50: sec
                    .sketches
                    .iter()
                    .map(|(k, s)| (k.clone(), ms(s, 0.5)))
                    .collect(),
                p99: sec
                    .sketches
                    .iter()
                    .map(|(k, s)| (k.clone(), ms(s, 0.99)))
                    .collect(),
                worker_cpu_s: sec.cpu_s,
                worker_rss_kb: sec.rss_kb,
                counts: sec
                    .sketches
                    .iter()
                    .map(|(k, s)| (k.clone(), s.count()))
                    .collect(),
                sketches: sec
                    .sketches
                    .iter()
                    .map(|(k, s)| (k.clone(), s.encode()))
                    .collect(),
            })
            .collect();
        let peak_ccu = timeseries.iter().map(|r| r.ccu).max().unwrap_or(0);
        let partial_workers = info
            .workers
            .iter()
            .filter(|w| !w.reported)
            .map(|w| w.index)
            .collect();
        Report {
            load_test_id: info.load_test_id,
            status: info.status,
            successful: agg.successful,
            failed: agg.failed,
            metrics: agg
                .sketches
                .iter()
                .map(|(k, s)| (k.clone(), s.summary()))
                .collect(),
            players: agg.players,
            skipped: agg.skipped,
            scenario: info.scenario,
            target: info.target,
            started_at_ms: info.started_at_ms,
            duration_s: info.duration_s,
            peak_ccu,
            phases: info
                .phases
                .iter()
                .map(|p| p.measured(&agg.seconds))
                .collect(),
            counters: agg.counters.clone(),
            errors: agg.errors.clone(),
            workers: info.workers,
            partial_workers,
            start_skew_ms: info.start_skew_ms,
            clock_uncertainty_ms: info.clock_uncertainty_ms,
            coordinator_rss_peak_kb: info.coordinator_rss_peak_kb,
            timeseries,
            sketches: agg
                .sketches
                .iter()
                .map(|(k, s)| (k.clone(), s.encode()))
                .collect(),
        }
    }

    /// Rebuilds the mergeable aggregate from a report's sketches and counts.
    pub fn to_aggregate(&self) -> Result<Aggregate, SketchError> {
        let mut agg = Aggregate {
            players: self.players,
            successful: self.successful,
            failed: self.failed,
            skipped: self.skipped,
            counters: self.counters.clone(),
            errors: self.errors.clone(),
            ..Default::default()
        };
        for (k, enc) in &self.sketches {
            agg.sketches.insert(k.clone(), Sketch::decode(enc)?);
        }
        for row in &self.timeseries {
            let mut sec = SecondAgg {
                ccu: row.ccu,
                counters: Counters {
                    arrivals: row.arrivals,
                    sends: row.sends,
                    receives: row.receives,
                    connects: row.connects,
                    disconnects: row.disconnects,
                    errors: row.errors,
                    chat_sent: row.chat_sent,
                    chat_delivered: row.chat_delivered,
                    ..Default::default()
                },
                cpu_s: row.worker_cpu_s,
                rss_kb: row.worker_rss_kb,
                reporters: 1,
                sketches: BTreeMap::new(),
            };
            for (k, enc) in &row.sketches {
                let mut s = Sketch::new(Precision::Window);
                s.merge(&Sketch::decode(enc)?)?;
                sec.sketches.insert(k.clone(), s);
            }
            agg.seconds.insert(row.t, sec);
        }
        Ok(agg)
    }

    /// Merges reports from several machines (each ran a shard of the same scenario).
    pub fn merge(reports: &[Report]) -> anyhow::Result<Report> {
        let first = reports
            .first()
            .ok_or_else(|| anyhow::anyhow!("nothing to merge"))?;
        let mut agg = Aggregate::default();
        let mut status = Status::Completed;
        let mut workers = Vec::new();
        for r in reports {
            agg.merge(&r.to_aggregate()?)?;
            status = status.worst(r.status);
            workers.extend(r.workers.iter().cloned());
        }
        let same_id = reports.iter().all(|r| r.load_test_id == first.load_test_id);
        let info = RunInfo {
            load_test_id: if same_id {
                first.load_test_id.clone()
            } else {
                uuid::Uuid::new_v4().to_string()
            },
            status,
            scenario: first.scenario.clone(),
            target: first.target.clone(),
            started_at_ms: reports.iter().map(|r| r.started_at_ms).min().unwrap_or(0),
            duration_s: reports.iter().map(|r| r.duration_s).fold(0.0, f64::max),
            workers,
            // Each shard had its own barrier: the merged figures are the worst shard's.
            start_skew_ms: reports
                .iter()
                .filter_map(|r| r.start_skew_ms)
                .reduce(f64::max),
            clock_uncertainty_ms: reports
                .iter()
                .filter_map(|r| r.clock_uncertainty_ms)
                .reduce(f64::max),
            coordinator_rss_peak_kb: reports
                .iter()
                .map(|r| r.coordinator_rss_peak_kb)
                .max()
                .unwrap_or(0),
            // Shards of one run share its schedule; the rates are recomputed from the merged
            // seconds, so they are the whole run's.
            phases: first.phases.clone(),
        };
        Ok(Report::build(info, &agg))
    }

    /// Reads a report written by `swarm run`.
    pub fn read(path: &Path) -> anyhow::Result<Report> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: not a swarm report: {e}", path.display()))
    }

    /// Writes `report.json` and `report.html` into `dir`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(dir.join("report.json"), json)?;
        std::fs::write(dir.join("report.html"), html::render(self))?;
        Ok(())
    }

    /// A short human summary for the terminal.
    pub fn summary_text(&self) -> String {
        let mut out = format!(
            "{} {:?}: players {} successful {} failed {} skipped {}, peak CCU {}\n",
            self.scenario,
            self.status,
            self.players,
            self.successful,
            self.failed,
            self.skipped,
            self.peak_ccu
        );
        out.push_str(&format!(
            "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
            "metric (ms)", "count", "min", "p80", "p99", "p99.9", "p99.99", "max"
        ));
        for (name, m) in &self.metrics {
            out.push_str(&format!(
                "{:<12} {:>9} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}\n",
                name,
                m.count,
                m.min,
                m.percentile80,
                m.percentile99,
                m.percentile99point9,
                m.percentile99point99,
                m.max
            ));
        }
        for p in &self.phases {
            let mut line = format!(
                "phase {:?} ({:.1}-{:.1} s): arrivals {:.1}/s",
                p.name,
                p.start_s,
                p.start_s + p.duration_s,
                p.arrivals_per_s
            );
            for (name, per_s) in &p.rates_per_s {
                line.push_str(&format!(", {name} {per_s:.1}/s"));
            }
            out.push_str(&line);
            out.push('\n');
        }
        if !self.errors.is_empty() {
            let errs: Vec<String> = self
                .errors
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            out.push_str(&format!("errors: {}\n", errs.join(" ")));
        }
        if let Some(skew) = self.start_skew_ms {
            out.push_str(&format!(
                "workers: {} (start skew {skew:.2} ms, clocks within ±{:.2} ms; coordinator peak RSS {} KiB)\n",
                self.workers.len(),
                self.clock_uncertainty_ms.unwrap_or(0.0),
                self.coordinator_rss_peak_kb
            ));
        }
        for w in self
            .workers
            .iter()
            .filter(|w| !w.reported || w.address.is_some())
        {
            let partial = match &w.lost {
                Some(why) => {
                    let counts: Vec<String> =
                        w.counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
                    format!(
                        ", {}: {why}; its first {} s are in the figures ({})",
                        w.status.name().to_uppercase(),
                        w.streamed_s,
                        counts.join(", ")
                    )
                }
                None => String::new(),
            };
            out.push_str(&format!(
                "  worker {} {}: players {} successful {} failed {}, peak RSS {} KiB{partial}\n",
                w.index,
                w.address.as_deref().unwrap_or("local"),
                w.players,
                w.successful,
                w.failed,
                w.rss_peak_kb,
            ));
        }
        if !self.partial_workers.is_empty() {
            out.push_str(&format!(
                "partial: the figures hold what workers {:?} streamed before they were given up on\n",
                self.partial_workers
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::{Metric, Recorder};
    use std::time::Duration;

    fn report(id: &str, n: u64, status: Status) -> Report {
        let mut r = Recorder::default();
        let mut agg = Aggregate::default();
        for t in 0..2 {
            for k in 0..n {
                r.latency(Metric::Ping, Duration::from_micros(50 + k * 13));
                r.count(|c| c.sends += 1);
            }
            r.ccu = n;
            agg.add_tick(&r.take_window(t)).expect("tick");
        }
        agg.add_result(&WorkerResult {
            players: n,
            successful: n,
            ..Default::default()
        });
        let info = RunInfo {
            load_test_id: id.into(),
            status,
            scenario: "s".into(),
            target: "http://127.0.0.1:1".into(),
            started_at_ms: 1,
            duration_s: 2.0,
            workers: vec![],
            start_skew_ms: None,
            clock_uncertainty_ms: None,
            coordinator_rss_peak_kb: 0,
            phases: vec![],
        };
        Report::build(info, &agg)
    }

    #[test]
    fn json_starts_with_the_seed_shape() {
        let json = serde_json::to_string(&report("x", 10, Status::Completed)).expect("json");
        assert!(
            json.starts_with(r#"{"loadTestId":"x","status":"completed","successful":10,"failed":0,"metrics":{"ping":{"count":20,"min":"#),
            "{json}"
        );
        for key in [
            "percentile80",
            "percentile90",
            "percentile99",
            "percentile99point9",
            "percentile99point99",
        ] {
            assert!(json.contains(key));
        }
    }

    /// Seconds 0-3: 100 arrivals and 100 authentications each; seconds 4-5: 50 authentications
    /// each and no arrivals (the server catching up).
    fn phased(phases: Vec<PhaseSummary>) -> Report {
        let mut rec = Recorder::default();
        let mut agg = Aggregate::default();
        for t in 0..6u64 {
            let (arrivals, auths) = if t < 4 { (100, 100) } else { (0, 50) };
            for _ in 0..auths {
                rec.latency(Metric::Auth, Duration::from_millis(3));
            }
            rec.count(|c| c.arrivals += arrivals);
            agg.add_tick(&rec.take_window(t)).expect("tick");
        }
        let info = RunInfo {
            load_test_id: "p".into(),
            status: Status::Completed,
            scenario: "s".into(),
            target: "x".into(),
            started_at_ms: 0,
            duration_s: 6.0,
            workers: vec![],
            start_skew_ms: None,
            clock_uncertainty_ms: None,
            coordinator_rss_peak_kb: 0,
            phases,
        };
        Report::build(info, &agg)
    }

    #[test]
    fn phases_report_their_achieved_rates() {
        let r = phased(vec![
            PhaseSummary::planned("ramp", 0.0, 4.0),
            PhaseSummary::planned("hold", 4.0, 2.0),
        ]);
        assert_eq!(r.phases.len(), 2);
        assert_eq!(r.phases[0].name, "ramp");
        assert_eq!(r.phases[0].arrivals_per_s, 100.0);
        assert_eq!(r.phases[0].rates_per_s["auth"], 100.0);
        assert_eq!(r.phases[1].arrivals_per_s, 0.0);
        assert_eq!(r.phases[1].rates_per_s["auth"], 50.0);

        // A boundary inside a second shares that second's samples by the time on each side:
        // [0, 2.5) holds 100 + 100 + 50 = 250 samples, [2.5, 6) holds 50 + 100 + 50 + 50 = 250.
        let r = phased(vec![
            PhaseSummary::planned("a", 0.0, 2.5),
            PhaseSummary::planned("b", 2.5, 3.5),
        ]);
        assert_eq!(r.phases[0].rates_per_s["auth"], 100.0);
        assert_eq!(r.phases[1].rates_per_s["auth"], 71.43);
        assert_eq!(r.phases[0].arrivals_per_s, 100.0);
        assert_eq!(r.phases[1].arrivals_per_s, 42.86);

        // In the JSON, after peakCcu, camelCase; merging shards recomputes from merged seconds.
        let json = serde_json::to_string(&r).expect("json");
        assert!(
            json.contains(r#""peakCcu":0,"phases":[{"name":"a","startS":0.0,"durationS":2.5,"arrivalsPerS":100.0,"ratesPerS":{"auth":100.0}}"#),
            "{json}"
        );
        let back: Report = serde_json::from_str(&json).expect("read back");
        let merged = Report::merge(&[back, r]).expect("merge");
        assert_eq!(merged.phases[0].rates_per_s["auth"], 200.0);
        assert_eq!(merged.phases[1].rates_per_s["auth"], 142.86);

        // A report written before phases existed still reads.
        let old = json.replace(
            &json[json.find(r#""phases":"#).expect("phases")
                ..json.find(r#""counters":"#).expect("counters")],
            "",
        );
        let old: Report = serde_json::from_str(&old).expect("old report");
        assert!(old.phases.is_empty());
    }

    /// A worker lost after its first second: the report lists it as partial, each second's
    /// `counts` add up to the whole-run counts, the text and the page say so, and merging keeps
    /// it listed. A report written before these fields still reads.
    #[test]
    fn a_lost_workers_share_is_marked_and_adds_up() {
        let mut agg = Aggregate::default();
        let (mut kept, mut lost) = (Recorder::default(), Recorder::default());
        for t in 0..3 {
            for k in 0..10 {
                kept.latency(Metric::Ping, Duration::from_micros(500 + k));
            }
            agg.add_tick(&kept.take_window(t)).expect("tick");
            if t == 0 {
                for k in 0..4 {
                    lost.latency(Metric::Ping, Duration::from_micros(900 + k));
                }
                agg.add_tick(&lost.take_window(t)).expect("tick");
            }
        }
        agg.add_lost(5, 0, "worker_lost");
        let workers = vec![
            WorkerSummary {
                index: 0,
                reported: true,
                counts: [("ping".to_string(), 30)].into(),
                ..Default::default()
            },
            WorkerSummary {
                index: 1,
                reported: false,
                status: WorkerStatus::Stalled,
                lost: Some("silent for 15s".into()),
                counts: [("ping".to_string(), 4)].into(),
                streamed_s: 1,
                ..Default::default()
            },
        ];
        let info = RunInfo {
            load_test_id: "l".into(),
            status: Status::Failed,
            scenario: "s".into(),
            target: "x".into(),
            started_at_ms: 0,
            duration_s: 3.0,
            workers,
            start_skew_ms: Some(0.0),
            clock_uncertainty_ms: None,
            coordinator_rss_peak_kb: 0,
            phases: vec![],
        };
        let r = Report::build(info, &agg);
        assert_eq!(r.partial_workers, vec![1]);
        assert_eq!(r.metrics["ping"].count, 34);
        let by_second: u64 = r.timeseries.iter().map(|row| row.counts["ping"]).sum();
        let by_worker: u64 = r.workers.iter().map(|w| w.counts["ping"]).sum();
        assert_eq!((by_second, by_worker), (34, 34));
        assert!(r
            .summary_text()
            .contains("STALLED: silent for 15s; its first 1 s"));
        assert!(html::render(&r).contains("Partial: every figure"));

        let json = serde_json::to_string(&r).expect("json");
        assert!(json.contains(r#""status":"stalled""#), "{json}");
        assert!(json.contains(r#""partialWorkers":[1]"#), "{json}");
        let back: Report = serde_json::from_str(&json).expect("read back");
        let merged = Report::merge(&[back, r]).expect("merge");
        assert_eq!(merged.partial_workers, vec![1, 1]);
        assert_eq!(merged.metrics["ping"].count, 68);

        // Written before: no partialWorkers, no status, counts or streamedS.
        let mut old: serde_json::Value = serde_json::from_str(&json).expect("value");
        old.as_object_mut()
            .expect("object")
            .remove("partialWorkers");
        for w in old["workers"].as_array_mut().expect("workers") {
            for key in ["status", "counts", "streamedS"] {
                w.as_object_mut().expect("worker").remove(key);
            }
        }
        let old: Report = serde_json::from_value(old).expect("an older report");
        assert!(old.partial_workers.is_empty());
        assert_eq!(
            Report::merge(&[old]).expect("merge").partial_workers,
            vec![1]
        );
    }

    #[test]
    fn merging_reports_adds_players_and_recomputes_percentiles() {
        let a = report("x", 10, Status::Completed);
        let b = report("x", 30, Status::Aborted);
        // Round-trip through JSON as `swarm merge` does.
        let a: Report = serde_json::from_str(&serde_json::to_string(&a).expect("ser")).expect("de");
        let m = Report::merge(&[a, b]).expect("merge");
        assert_eq!(m.load_test_id, "x");
        assert_eq!(m.status, Status::Aborted);
        assert_eq!(m.players, 40);
        assert_eq!(m.metrics["ping"].count, 80);
        assert_eq!(m.timeseries.len(), 2);
        assert_eq!(m.timeseries[1].ccu, 40);
        assert_eq!(m.peak_ccu, 40);
        // The merged max is the larger worker's max, not an average.
        let big = report("x", 30, Status::Completed);
        assert_eq!(m.metrics["ping"].max, big.metrics["ping"].max);
    }
}
