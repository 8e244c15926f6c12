//! The world's metrics: actors per shard, ticks, checkpoints.

use prometheus::{
    Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

pub struct WorldMetrics {
    pub shards: IntGauge,
    pub restored: IntGauge,
    pub towers: IntGaugeVec,
    pub creeps: IntGaugeVec,
    pub tick_seconds: Histogram,
    pub late_ticks: IntCounter,
    pub arrivals: IntCounter,
    pub kills: IntCounter,
    pub checkpoint_pause_seconds: Histogram,
    pub checkpoint_seconds: Histogram,
    pub checkpoint_bytes: IntGauge,
    pub checkpoints: IntCounterVec,
    pub last_checkpoint: IntGaugeVec,
    pub subscribers: IntGauge,
    pub states_sent: IntCounter,
    pub states_skipped: IntCounter,
    pub actions: IntCounter,
    pub route_queue: IntGauge,
    pub payouts: IntCounterVec,
    pub payouts_waiting: IntGauge,
    pub log_failures: IntCounter,
    pub log_damage: IntCounterVec,
    /// A clustered world: the epoch of each shard this node runs (absent when it runs none).
    pub epoch: IntGaugeVec,
    pub moves: IntCounterVec,
    pub start_seconds: Histogram,
    pub remote: IntCounterVec,
}

impl WorldMetrics {
    /// Sets `shard`'s towers and live creeps.
    pub fn count_actors(&self, shard: &muster_world::shard::Shard) {
        let label = shard.id.to_string();
        self.towers
            .with_label_values(&[&label])
            .set(shard.towers.len() as i64);
        self.creeps
            .with_label_values(&[&label])
            .set(shard.creeps.alive() as i64);
    }

    /// Forgets shard `shard`'s gauges: this node no longer runs it.
    pub fn forget(&self, shard: u32) {
        let label = shard.to_string();
        for gauge in [
            &self.towers,
            &self.creeps,
            &self.epoch,
            &self.last_checkpoint,
        ] {
            let _ = gauge.remove_label_values(&[&label]);
        }
    }

    pub fn register(registry: &Registry) -> WorldMetrics {
        macro_rules! register {
            ($metric:expr) => {
                crate::base::metrics::register(registry, $metric)
            };
        }
        let ms_buckets = vec![
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
        ];
        WorldMetrics {
            shards: register!(IntGauge::new("world_shards", "World shards running.")),
            restored: register!(IntGauge::new(
                "world_shards_restored",
                "Shards restored from a checkpoint at start (the others were new)."
            )),
            towers: register!(IntGaugeVec::new(
                Opts::new("world_towers", "Towers, by shard."),
                &["shard"]
            )),
            creeps: register!(IntGaugeVec::new(
                Opts::new("world_creeps", "Creeps alive, by shard."),
                &["shard"]
            )),
            tick_seconds: register!(Histogram::with_opts(
                HistogramOpts::new("world_tick_seconds", "How long a shard's tick took.")
                    .buckets(ms_buckets.clone())
            )),
            late_ticks: register!(IntCounter::new(
                "world_late_ticks_total",
                "Ticks that took longer than the tick period."
            )),
            arrivals: register!(IntCounter::new(
                "world_arrivals_total",
                "Creeps that reached their target."
            )),
            kills: register!(IntCounter::new(
                "world_kills_total",
                "Creeps killed by towers."
            )),
            checkpoint_pause_seconds: register!(Histogram::with_opts(
                HistogramOpts::new(
                    "world_checkpoint_pause_seconds",
                    "How long a shard stopped to copy itself for a checkpoint."
                )
                .buckets(ms_buckets.clone())
            )),
            checkpoint_seconds: register!(Histogram::with_opts(
                HistogramOpts::new(
                    "world_checkpoint_seconds",
                    "How long writing a checkpoint took (while the shard kept ticking)."
                )
                .buckets(ms_buckets)
            )),
            checkpoint_bytes: register!(IntGauge::new(
                "world_checkpoint_bytes",
                "Size of the last checkpoint written."
            )),
            checkpoints: register!(IntCounterVec::new(
                Opts::new("world_checkpoints_total", "Checkpoints written, by result."),
                &["result"]
            )),
            last_checkpoint: register!(IntGaugeVec::new(
                Opts::new(
                    "world_last_checkpoint_timestamp_seconds",
                    "When each shard's checkpoint on disk was written (Unix seconds)."
                ),
                &["shard"]
            )),
            subscribers: register!(IntGauge::new(
                "world_subscribers",
                "Sockets subscribed to an area of interest."
            )),
            states_sent: register!(IntCounter::new(
                "world_states_sent_total",
                "world_state updates queued to subscribers."
            )),
            payouts: register!(IntCounterVec::new(
                Opts::new(
                    "world_payouts_total",
                    "Arrivals of players' creeps paid into their owner's wallet, by result."
                ),
                &["result"]
            )),
            payouts_waiting: register!(IntGauge::new(
                "world_payouts_waiting",
                "Credits (arrivals' earnings, refunds) waiting to be written to the database."
            )),
            log_failures: register!(IntCounter::new(
                "world_log_failures_total",
                "Appends to a shard's action log that failed (their actions were refused)."
            )),
            log_damage: register!(IntCounterVec::new(
                Opts::new(
                    "world_log_damage_total",
                    "Bad stretches found in the action logs at start: `torn_tail` (cut off, never \
                     acknowledged) or `middle` (good records after it were kept)."
                ),
                &["kind"]
            )),
            route_queue: register!(IntGauge::new(
                "world_route_queue",
                "Route requests of players' connects waiting or being computed (a counter)."
            )),
            actions: register!(IntCounter::new(
                "world_actions_total",
                "Player actions applied and written to the action log."
            )),
            epoch: register!(IntGaugeVec::new(
                Opts::new(
                    "world_shard_epoch",
                    "The lease epoch of each shard this node runs (a clustered world)."
                ),
                &["shard"]
            )),
            moves: register!(IntCounterVec::new(
                Opts::new(
                    "world_shard_moves_total",
                    "Shards this node took (`taken`), handed over after a last checkpoint \
                     (`released`) or stopped because its lease was lost (`lost`)."
                ),
                &["kind"]
            )),
            start_seconds: register!(Histogram::with_opts(
                HistogramOpts::new(
                    "world_shard_start_seconds",
                    "From a shard's lease taken to its first tick here: restore and replay."
                )
                .buckets(vec![0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
            )),
            remote: register!(IntCounterVec::new(
                Opts::new(
                    "world_remote_requests_total",
                    "Subscriptions and actions sent to the node that runs their shard, by kind \
                     and result (`ok`, `error`, `no_owner`)."
                ),
                &["kind", "result"]
            )),
            states_skipped: register!(IntCounter::new(
                "world_states_skipped_total",
                "Updates skipped because the subscriber had not yet taken the previous one (stale state is dropped, never queued)."
            )),
        }
    }
}
