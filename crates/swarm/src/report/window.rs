//! `swarm window REPORT --from-s A --to-s B`: latency percentiles and rates over a slice of a
//! run, merged from the report's per-second sketches. A benchmark measuring a steady state reads
//! only its hold window this way, leaving out the ramp (where the rate was still climbing) and
//! the teardown.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::measure::sketch::{Precision, Sketch, SketchError};
use crate::report::Report;

/// One metric over the window; times in milliseconds (per-second sketches resolve values to
/// within 1 %).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowMetric {
    pub count: u64,
    /// Samples per second over the window.
    pub per_second: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub p99point9: f64,
    pub max: f64,
}

/// Every metric and counter over `[from_s, to_s)` of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Window {
    pub from_s: u64,
    pub to_s: u64,
    /// Seconds of the window that the report has rows for.
    pub seconds: u64,
    pub errors: u64,
    pub sends: u64,
    pub min_ccu: u64,
    pub metrics: BTreeMap<String, WindowMetric>,
}

/// Merges the report's seconds `from_s..to_s`.
pub fn window(report: &Report, from_s: u64, to_s: u64) -> Result<Window, SketchError> {
    let mut merged: BTreeMap<String, Sketch> = BTreeMap::new();
    let (mut seconds, mut errors, mut sends) = (0, 0, 0);
    let mut min_ccu = u64::MAX;
    for row in report
        .timeseries
        .iter()
        .filter(|r| r.t >= from_s && r.t < to_s)
    {
        seconds += 1;
        errors += row.errors;
        sends += row.sends;
        min_ccu = min_ccu.min(row.ccu);
        for (name, encoded) in &row.sketches {
            merged
                .entry(name.clone())
                .or_insert_with(|| Sketch::new(Precision::Window))
                .merge(&Sketch::decode(encoded)?)?;
        }
    }
    let ms = |s: &Sketch, q: f64| s.quantile_micros(q) as f64 / 1000.0;
    let metrics = merged
        .iter()
        .map(|(name, s)| {
            let count = s.count();
            (
                name.clone(),
                WindowMetric {
                    count,
                    per_second: if seconds > 0 {
                        count as f64 / seconds as f64
                    } else {
                        0.0
                    },
                    p50: ms(s, 0.50),
                    p95: ms(s, 0.95),
                    p99: ms(s, 0.99),
                    p99point9: ms(s, 0.999),
                    max: s.max_micros() as f64 / 1000.0,
                },
            )
        })
        .collect();
    Ok(Window {
        from_s,
        to_s,
        seconds,
        errors,
        sends,
        min_ccu: if seconds > 0 { min_ccu } else { 0 },
        metrics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::{Aggregate, Metric, Recorder};
    use crate::report::{RunInfo, Status};
    use std::time::Duration;

    #[test]
    fn merges_only_the_seconds_asked_for() {
        let mut rec = Recorder::default();
        let mut agg = Aggregate::default();
        for t in 0..10u64 {
            // Seconds 0-4 are slow (100 ms), 5-9 fast (1 ms); 100 samples each.
            let d = Duration::from_millis(if t < 5 { 100 } else { 1 });
            for _ in 0..100 {
                rec.latency_named("rpc_x", d);
                rec.latency(Metric::Ping, d);
            }
            agg.add_tick(&rec.take_window(t)).expect("tick");
        }
        let info = RunInfo {
            load_test_id: "t".into(),
            status: Status::Completed,
            scenario: "s".into(),
            target: "x".into(),
            started_at_ms: 0,
            duration_s: 10.0,
            workers: vec![],
            start_skew_ms: None,
            clock_uncertainty_ms: None,
            coordinator_rss_peak_kb: 0,
            phases: vec![],
        };
        let report = Report::build(info, &agg);
        let w = window(&report, 5, 10).expect("window");
        assert_eq!(w.seconds, 5);
        let m = &w.metrics["rpc_x"];
        assert_eq!(m.count, 500);
        assert_eq!(m.per_second, 100.0);
        assert!((0.99..=1.01).contains(&m.p95), "{m:?}");
        let all = window(&report, 0, 10).expect("window");
        assert!(all.metrics["rpc_x"].p95 > 99.0);
    }
}
