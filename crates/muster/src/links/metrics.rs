//! Metrics of the links service (`muster_links_*`), in the server's one Prometheus registry.

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

pub struct LinkMetrics {
    /// Create requests, by outcome (`created`, `existing`, `refused`).
    pub creates: IntCounterVec,
    /// Visits of short links, by outcome (`redirected`, `not_found`, `gone`, `failed`).
    pub redirects: IntCounterVec,
    /// Link lookups, by where the link came from (`hit`: the cache, `miss`: the store).
    pub cache: IntCounterVec,
    /// Click counts gathered in memory, waiting for the next flush (by link and day).
    pub clicks_pending: IntGauge,
    /// Click flushes, by outcome (`ok`, `failed`: kept for the next one).
    pub click_flushes: IntCounterVec,
    /// The two series every redirect touches, looked up once (a labelled lookup hashes and
    /// locks on every call).
    pub redirected: IntCounter,
    pub cache_hits: IntCounter,
}

impl LinkMetrics {
    pub fn register(registry: &Registry) -> LinkMetrics {
        macro_rules! register {
            ($metric:expr) => {
                crate::base::metrics::register(registry, $metric)
            };
        }
        let counter = |name: &str, help: &str, label: &str| {
            IntCounterVec::new(Opts::new(name, help), &[label])
        };
        let redirects = register!(counter(
            "links_redirects_total",
            "Short link visits, by outcome (redirected, not_found, gone, failed).",
            "outcome"
        ));
        let cache = register!(counter(
            "links_cache_lookups_total",
            "Link lookups, by result (hit: from memory, miss: read from the store).",
            "result"
        ));
        LinkMetrics {
            redirected: redirects.with_label_values(&["redirected"]),
            cache_hits: cache.with_label_values(&["hit"]),
            redirects,
            cache,
            creates: register!(counter(
                "links_creates_total",
                "Link create requests, by outcome (created, existing, refused).",
                "outcome"
            )),
            clicks_pending: register!(IntGauge::new(
                "links_clicks_pending",
                "Click counts (per link and day) gathered in memory, waiting for the next flush."
            )),
            click_flushes: register!(counter(
                "links_click_flushes_total",
                "Batched writes of click counts, by outcome.",
                "outcome"
            )),
        }
    }
}
