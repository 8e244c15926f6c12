//! Metrics of matches, the matchmaker and rooms (`muster_match_*`, `muster_matchmaker_*`,
//! `muster_rooms`), registered in the server's one Prometheus registry. Gauges move where things
//! happen; nothing is counted by walking a collection.

use prometheus::{
    Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

pub struct MatchMetrics {
    /// Matches alive, by kind (`relayed`, `authoritative`).
    pub matches: IntGaugeVec,
    /// Rooms alive.
    pub rooms: IntGauge,
    /// Players (presences) in matches.
    pub players: IntGauge,
    /// Time an authoritative tick takes (handler loop plus sending its messages).
    pub tick_duration: Histogram,
    /// How late ticks start after their scheduled instant.
    pub tick_lateness: Histogram,
    /// Ticks that started more than half a tick period late, or were skipped.
    pub late_ticks: IntCounter,
    /// Ticks run.
    pub ticks: IntCounter,
    /// Match messages refused, by reason (`rate`, `size`, `queue_full`, `not_member`).
    pub inputs_dropped: IntCounterVec,
    /// Requests refused with an error, by kind of error.
    pub errors: IntCounterVec,
    /// Tickets waiting in the matchmaker.
    pub matchmaker_tickets: IntGauge,
    /// Time one matchmaker pass takes.
    pub matchmaker_pass: Histogram,
    /// Players matched.
    pub matchmaker_matched: IntCounter,
    /// How long matched tickets waited, in whole passes (the matchmaker's resolution).
    pub matchmaker_wait: Histogram,
    /// Join tokens remembered as used (single use), until they expire.
    pub used_tokens: IntGauge,
    /// In a cluster: the matchmaker lease's epoch while this node holds it, else 0.
    pub matchmaker_epoch: IntGauge,
}

const TICK_BUCKETS: &[f64] = &[
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1,
];

impl MatchMetrics {
    pub fn register(registry: &Registry) -> MatchMetrics {
        macro_rules! register {
            ($metric:expr) => {
                crate::base::metrics::register(registry, $metric)
            };
        }
        let histogram = |name: &str, help: &str| {
            Histogram::with_opts(HistogramOpts::new(name, help).buckets(TICK_BUCKETS.to_vec()))
        };
        MatchMetrics {
            matches: register!(IntGaugeVec::new(
                Opts::new("matches", "Matches alive, by kind."),
                &["kind"]
            )),
            rooms: register!(IntGauge::new("rooms", "Rooms alive.")),
            players: register!(IntGauge::new(
                "match_players",
                "Players (presences) in matches."
            )),
            tick_duration: register!(histogram(
                "match_tick_duration_seconds",
                "Time an authoritative match tick takes."
            )),
            tick_lateness: register!(histogram(
                "match_tick_lateness_seconds",
                "How late authoritative ticks start after their scheduled instant."
            )),
            late_ticks: register!(IntCounter::new(
                "match_late_ticks_total",
                "Authoritative ticks started more than half a period late, or skipped."
            )),
            ticks: register!(IntCounter::new(
                "match_ticks_total",
                "Authoritative match ticks run."
            )),
            inputs_dropped: register!(IntCounterVec::new(
                Opts::new(
                    "match_inputs_dropped_total",
                    "Match messages refused, by reason."
                ),
                &["reason"]
            )),
            errors: register!(IntCounterVec::new(
                Opts::new(
                    "match_errors_total",
                    "Match, matchmaker and room requests refused, by error."
                ),
                &["error"]
            )),
            matchmaker_tickets: register!(IntGauge::new(
                "matchmaker_tickets",
                "Tickets waiting in the matchmaker."
            )),
            matchmaker_pass: register!(Histogram::with_opts(
                HistogramOpts::new(
                    "matchmaker_pass_duration_seconds",
                    "Time one matchmaker pass takes."
                )
                .buckets(TICK_BUCKETS.to_vec())
            )),
            matchmaker_matched: register!(IntCounter::new(
                "matchmaker_matched_total",
                "Players matched by the matchmaker."
            )),
            matchmaker_wait: register!(Histogram::with_opts(
                HistogramOpts::new(
                    "matchmaker_wait_seconds",
                    "How long a matched ticket waited, from its first pass to its match (passes × matchmaker.interval_ms)."
                )
                .buckets(vec![
                    0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0
                ])
            )),
            used_tokens: register!(IntGauge::new(
                "match_join_tokens_used",
                "Join tokens remembered as used until they expire."
            )),
            matchmaker_epoch: register!(IntGauge::new(
                "matchmaker_lease_epoch",
                "In a cluster: the matchmaker lease's epoch while this node runs the passes, else 0."
            )),
        }
    }
}
