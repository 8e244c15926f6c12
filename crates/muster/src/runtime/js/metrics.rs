//! The module's own figures (its RPCs are counted as every server function is:
//! `muster_rpc_calls_total`, `muster_rpc_duration_seconds`): hook calls by outcome, match
//! handler loop time and failures by handler, reloads.

use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};

use std::collections::{BTreeMap, HashMap};

use prometheus::core::Collector;

use crate::base::metrics::{label_of, register};

#[derive(Clone)]
pub struct JsMetrics {
    calls: HistogramVec,
    failures: IntCounterVec,
    hooks: IntCounterVec,
    pub(super) reloads: IntCounter,
    /// VMs in the pool that runs RPCs and hooks.
    pub(super) vms: IntGauge,
}

impl JsMetrics {
    pub fn new(registry: &Registry) -> JsMetrics {
        JsMetrics {
            calls: register(
                registry,
                HistogramVec::new(
                    HistogramOpts::new(
                        "js_match_loop_seconds",
                        "Time in a JavaScript match's matchLoop, by handler (match:NAME).",
                    )
                    .buckets(vec![
                        0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                        0.01, 0.025, 0.05, 0.1,
                    ]),
                    &["handler"],
                ),
            ),
            failures: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "js_failures_total",
                        "JavaScript match handlers that threw or were interrupted, by handler.",
                    ),
                    &["handler"],
                ),
            ),
            hooks: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "js_hook_calls_total",
                        "Calls of the module's hooks, by table (before, after, rtBefore, rtAfter, \
                         matched, schedule), hook and outcome (ok, error).",
                    ),
                    &["table", "hook", "outcome"],
                ),
            ),
            reloads: register(
                registry,
                IntCounter::new(
                    "js_reloads_total",
                    "JavaScript module reloads that took effect.",
                ),
            ),
            vms: register(
                registry,
                IntGauge::new(
                    "js_vms",
                    "JavaScript VMs in the pool running RPCs and hooks (runtime.js_vms up to js_max_vms).",
                ),
            ),
        }
    }

    /// The loop-time histogram of `handler`.
    pub(super) fn loop_time(&self, handler: &str) -> prometheus::Histogram {
        self.calls.with_label_values(&[handler])
    }

    pub(super) fn failed(&self, handler: &str) {
        self.failures.with_label_values(&[handler]).inc();
    }

    /// Counts a hook's call (the hooks are the module's registered ones: a bounded set).
    pub(super) fn hook_called(&self, table: &str, hook: &str, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.hooks.with_label_values(&[table, hook, outcome]).inc();
    }

    /// Every hook's calls so far: (table, hook) → outcome → count.
    pub(super) fn hook_calls(&self) -> HashMap<(String, String), BTreeMap<String, u64>> {
        let mut calls: HashMap<(String, String), BTreeMap<String, u64>> = HashMap::new();
        for family in self.hooks.collect() {
            for metric in family.get_metric() {
                let label = |name: &str| label_of(metric, name);
                calls
                    .entry((label("table"), label("hook")))
                    .or_default()
                    .insert(label("outcome"), metric.get_counter().get_value() as u64);
            }
        }
        calls
    }

    /// A match handler's failures so far (`js_failures_total`), read without creating its series.
    pub(super) fn failures_of(&self, handler: &str) -> u64 {
        self.failures
            .collect()
            .iter()
            .flat_map(|family| family.get_metric())
            .filter(|m| m.get_label().iter().any(|l| l.value() == handler))
            .map(|m| m.get_counter().get_value() as u64)
            .sum()
    }
}
