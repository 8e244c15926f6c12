//! Prometheus metrics, pulled from `GET /metrics`. Counts are kept as counters and gauges updated
//! where things happen, never computed by walking a collection.

use std::time::Duration;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    pub sockets_open: IntGauge,
    pub users_online: IntGauge,
    pub sockets_closed: IntCounterVec,
    pub accounts_created: IntCounter,
    pub authentications: IntCounterVec,
    pub http_requests: HistogramVec,
    pub api_calls: HistogramVec,
    pub db_operations: HistogramVec,
    pub db_batch_size: Histogram,
    pub db_writes_queued: IntGauge,
    pub db_group_commits: Histogram,
    pub db_writes_alone: IntCounter,
    pub gateway_lookups: IntCounterVec,
    pub gateway_fetches: IntCounterVec,
    pub gateway_origin_calls: IntCounterVec,
    pub gateway_origin_in_flight: IntGaugeVec,
    pub gateway_cache_bytes: IntGauge,
    pub economy_writes: IntCounterVec,
    pub rpc_calls: IntCounterVec,
    pub rpc_duration: HistogramVec,
    pub realtime_messages: IntCounterVec,
    pub realtime_errors: IntCounterVec,
    pub rate_limited: IntCounterVec,
    /// HTTP connections open now (before any WebSocket upgrade).
    pub http_connections_open: IntGauge,
    /// HTTP connections ended, by reason (`header_timeout`, `closed`, `error`).
    pub http_connections_closed: IntCounterVec,
    /// Connections closed at accept, by limit (`per_ip`, `total`).
    pub connections_refused: IntCounterVec,
    /// ENet datagrams, by direction (`in`, `out`).
    pub enet_datagrams: IntCounterVec,
    /// ENet socket system calls, by call (`recvmmsg`, `sendmmsg`).
    pub enet_syscalls: IntCounterVec,
    /// ENet datagrams dropped before an ENet host read them, by reason.
    pub enet_dropped: IntCounterVec,
    /// ENet peers connected now (joined or not yet).
    pub enet_peers: IntGauge,
    pub outgoing_dropped: IntCounter,
    pub chat_channels: IntGauge,
    pub chat_members: IntGauge,
    pub chat_messages_in: IntCounterVec,
    pub chat_messages_out: IntCounter,
    pub chat_presence_events_out: IntCounter,
    pub chat_deliveries_dropped: IntCounter,
    pub chat_errors: IntCounterVec,
}

const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// The value of label `name` of a gathered `metric` (empty when it has none): for reading a
/// counter's label sets back without creating any.
pub fn label_of(metric: &prometheus::proto::Metric, name: &str) -> String {
    metric
        .get_label()
        .iter()
        .find(|l| l.name() == name)
        .map(|l| l.value().to_owned())
        .unwrap_or_default()
}

/// Registers `metric` in `registry` and hands it back. Every definition is static, so a failure
/// (a bad name, a name registered twice) is a bug, not a runtime condition.
pub(crate) fn register<M>(registry: &Registry, metric: prometheus::Result<M>) -> M
where
    M: prometheus::core::Collector + Clone + 'static,
{
    let metric = metric.expect("static metric definition is valid");
    registry
        .register(Box::new(metric.clone()))
        .expect("metric names are unique");
    metric
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry =
            Registry::new_custom(Some("muster".into()), None).expect("static prefix is valid");
        macro_rules! register {
            ($metric:expr) => {
                register(&registry, $metric)
            };
        }
        let latency = |name: &str, help: &str| {
            HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec())
        };
        // The process's CPU seconds, resident and virtual memory, open and maximum file
        // descriptors, threads and start time (muster_process_*), read from /proc at each scrape.
        #[cfg(target_os = "linux")]
        let _ = registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ));
        register!(IntGaugeVec::new(
            Opts::new(
                "build_info",
                "Always 1; the labels name the running build (the crate version)."
            ),
            &["version"]
        ))
        .with_label_values(&[env!("CARGO_PKG_VERSION")])
        .set(1);
        Metrics {
            sockets_open: register!(IntGauge::new("sockets_open", "Realtime sockets open now.")),
            users_online: register!(IntGauge::new(
                "users_online",
                "Distinct users with at least one socket open."
            )),
            sockets_closed: register!(IntCounterVec::new(
                Opts::new(
                    "sockets_closed_total",
                    "Realtime sockets closed, by reason (client_closed, connection_reset, keepalive_timeout, ...; docs/ARCHITECTURE.md)."
                ),
                &["reason"]
            )),
            accounts_created: register!(IntCounter::new(
                "accounts_created_total",
                "Accounts created."
            )),
            authentications: register!(IntCounterVec::new(
                Opts::new(
                    "authentications_total",
                    "Authentication calls, by method and outcome."
                ),
                &["method", "outcome"]
            )),
            http_requests: register!(HistogramVec::new(
                latency(
                    "http_request_duration_seconds",
                    "HTTP request latency, by route and status."
                ),
                &["route", "status"]
            )),
            api_calls: register!(HistogramVec::new(
                latency(
                    "api_call_duration_seconds",
                    "Calls of Nakama's client API, by call (its gRPC method name), transport (rest or grpc) and gRPC code (OK, NOT_FOUND, ...)."
                ),
                &["call", "transport", "code"]
            )),
            db_operations: register!(HistogramVec::new(
                latency(
                    "db_operation_duration_seconds",
                    "Database operation latency as callers see it, by operation."
                ),
                &["op"]
            )),
            db_batch_size: register!(Histogram::with_opts(
                HistogramOpts::new("db_group_commit_size", "Writes per group commit.")
                    .buckets(vec![
                        1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0
                    ])
            )),
            db_writes_queued: register!(IntGauge::new(
                "db_writes_queued",
                "Writes waiting for the group-commit writer (bounded by database.write_queue_size)."
            )),
            db_group_commits: register!(Histogram::with_opts(
                HistogramOpts::new(
                    "db_group_commit_duration_seconds",
                    "Time of one group commit, BEGIN to durable COMMIT (its count: commits)."
                )
                .buckets(vec![
                    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0
                ])
            )),
            db_writes_alone: register!(IntCounter::new(
                "db_writes_run_alone_total",
                "Writes taken out of a failed group commit and run in a transaction of their own."
            )),
            economy_writes: register!(IntCounterVec::new(
                Opts::new(
                    "economy_writes_total",
                    "Wallet and inventory changes, by outcome (applied, replayed, refused, invalid, failed)."
                ),
                &["outcome"]
            )),
            rpc_calls: register!(IntCounterVec::new(
                Opts::new(
                    "rpc_calls_total",
                    "Server function calls, by function and outcome (ok or the error's gRPC code name)."
                ),
                &["function", "outcome"]
            )),
            rpc_duration: register!(HistogramVec::new(
                latency(
                    "rpc_duration_seconds",
                    "Server function latency, from the call to its answer, by function."
                ),
                &["function"]
            )),
            realtime_messages: register!(IntCounterVec::new(
                Opts::new(
                    "realtime_messages_total",
                    "Realtime envelopes received, by kind."
                ),
                &["kind"]
            )),
            realtime_errors: register!(IntCounterVec::new(
                Opts::new(
                    "realtime_errors_total",
                    "Realtime envelopes rejected, by reason."
                ),
                &["reason"]
            )),
            http_connections_open: register!(IntGauge::new(
                "http_connections_open",
                "HTTP connections open now (a WebSocket leaves this count when it is upgraded)."
            )),
            http_connections_closed: register!(IntCounterVec::new(
                Opts::new(
                    "http_connections_closed_total",
                    "HTTP connections ended, by reason (header_timeout: a request head, or the next one on an idle keep-alive connection, did not arrive within limits.header_read_timeout_ms)."
                ),
                &["reason"]
            )),
            connections_refused: register!(IntCounterVec::new(
                Opts::new(
                    "connections_refused_total",
                    "Connections closed as soon as accepted, by limit (per_ip, total)."
                ),
                &["limit"]
            )),
            enet_datagrams: register!(IntCounterVec::new(
                Opts::new(
                    "enet_datagrams_total",
                    "ENet UDP datagrams, by direction (in, out)."
                ),
                &["direction"]
            )),
            enet_syscalls: register!(IntCounterVec::new(
                Opts::new(
                    "enet_syscalls_total",
                    "System calls on the ENet socket, by call (recvmmsg, sendmmsg)."
                ),
                &["call"]
            )),
            enet_dropped: register!(IntCounterVec::new(
                Opts::new(
                    "enet_dropped_total",
                    "ENet datagrams dropped before ENet read them, by reason (malformed, truncated, spoofed, unknown_peer, peer_rate, connect_rate, send_failed)."
                ),
                &["reason"]
            )),
            enet_peers: register!(IntGauge::new(
                "enet_peers",
                "ENet peers connected now."
            )),
            gateway_lookups: register!(IntCounterVec::new(
                Opts::new(
                    "gateway_lookups_total",
                    "GraphQL gateway field lookups, by where the value came from (hit, miss, coalesced, stale, stale_if_error)."
                ),
                &["status"]
            )),
            gateway_fetches: register!(IntCounterVec::new(
                Opts::new(
                    "gateway_fetches_total",
                    "Gateway cache fetches started (one per key however many wait), by kind (started, early, failed)."
                ),
                &["kind"]
            )),
            gateway_origin_calls: register!(IntCounterVec::new(
                Opts::new(
                    "gateway_origin_calls_total",
                    "Calls that reached each origin, by outcome (ok, error)."
                ),
                &["origin", "outcome"]
            )),
            gateway_origin_in_flight: register!(IntGaugeVec::new(
                Opts::new(
                    "gateway_origin_in_flight",
                    "Calls in flight to each origin (bounded by its concurrency)."
                ),
                &["origin"]
            )),
            gateway_cache_bytes: register!(IntGauge::new(
                "gateway_cache_bytes",
                "Bytes the gateway cache holds (bounded by gateway.cache_bytes)."
            )),
            rate_limited: register!(IntCounterVec::new(
                Opts::new(
                    "rate_limited_total",
                    "Requests refused by a per-IP rate limit, by limit."
                ),
                &["limit"]
            )),
            outgoing_dropped: register!(IntCounter::new(
                "outgoing_queue_full_total",
                "Sockets closed because their outgoing queue was full."
            )),
            chat_channels: register!(IntGauge::new(
                "chat_channels",
                "Chat channels with at least one member."
            )),
            chat_members: register!(IntGauge::new(
                "chat_members",
                "Channel memberships (one per socket per channel joined)."
            )),
            chat_messages_in: register!(IntCounterVec::new(
                Opts::new(
                    "chat_messages_received_total",
                    "Chat messages accepted from clients, by kind (send, update, remove)."
                ),
                &["kind"]
            )),
            chat_messages_out: register!(IntCounter::new(
                "chat_messages_delivered_total",
                "Chat messages queued to members' sockets (one per recipient)."
            )),
            chat_presence_events_out: register!(IntCounter::new(
                "chat_presence_events_delivered_total",
                "Channel presence events queued to members' sockets (one per recipient)."
            )),
            chat_deliveries_dropped: register!(IntCounter::new(
                "chat_deliveries_dropped_total",
                "Chat deliveries refused because the recipient's outgoing queue was full \
                 (that socket is then closed with 1008)."
            )),
            chat_errors: register!(IntCounterVec::new(
                Opts::new(
                    "chat_errors_total",
                    "Chat requests refused with an error envelope, by reason."
                ),
                &["reason"]
            )),
            registry,
        }
    }

    pub fn observe_db(&self, op: &str, elapsed: Duration) {
        self.db_operations
            .with_label_values(&[op])
            .observe(elapsed.as_secs_f64());
    }

    /// The registry, for modules that register their own metrics (e.g. [`crate::matches`]).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The Prometheus text exposition of every metric.
    /// Brings `counter` up to `total`, a count kept elsewhere (atomics read at scrape time).
    pub fn catch_up(counter: &IntCounter, total: u64) {
        let seen = counter.get();
        if total > seen {
            counter.inc_by(total - seen);
        }
    }

    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buffer);
        String::from_utf8(buffer).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
