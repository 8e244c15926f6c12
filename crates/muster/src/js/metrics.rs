//! The module's own figures (its RPCs are counted as every server function is:
//! `muster_rpc_calls_total`, `muster_rpc_duration_seconds`): match handler calls and loop
//! time by handler, failures, reloads.

use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};

use crate::base::metrics::register;

#[derive(Clone)]
pub struct JsMetrics {
    calls: HistogramVec,
    failures: IntCounterVec,
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
}
