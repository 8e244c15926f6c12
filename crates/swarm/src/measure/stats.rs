//! What gets measured and counted, and how partial results travel and merge.
//!
//! A worker keeps one [`Recorder`]: the current second's sketches (at run precision) and
//! counters, which it ships to the coordinator every second as a [`Tick`] and then clears, and
//! at the end a [`WorkerResult`] with what only the worker knows of its players (how many
//! succeeded, failed, never started) and its resources.
//!
//! The coordinator folds every tick into an [`Aggregate`] twice: into the run's figures (sketches
//! added at run precision, counters and failures by kind summed) and into that second's row of
//! the time series (the sketches reduced to window precision, exactly). So the run's figures are
//! the sum of the seconds, worker by worker, whether or not a worker lived to send its result: a
//! worker lost mid-run keeps every sample it streamed, in the run's figures as in its seconds,
//! and the report can never contradict its own time series. [`Streamed`] keeps one worker's part,
//! so a report shows what each worker added. Everything only ever adds (counts are summed,
//! sketches merged), so the order in which workers report does not matter; `swarm merge` folds
//! several machines' aggregates the same way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::measure::sketch::{Precision, Sketch, SketchError};

/// A latency metric. New steps add variants; the report names them with [`Metric::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Device authentication: request intended → response received.
    Auth,
    /// Realtime socket: TCP connect + WebSocket upgrade, intended start → socket open.
    Connect,
    /// Heartbeat round trip: ping intended send time → pong received.
    Ping,
    /// How late the client sent a ping versus its timer: the harness's own health. If this
    /// grows, the load generator, not the server, is saturated.
    ClientLag,
    /// Matchmaking: `matchmaker_add` intended → `matchmaker_matched` received.
    Matchmake,
    /// Joining a match (WebSocket or TCP with a token): intended → `match` received.
    Join,
    /// Match input round trip (Space Ape's `RTT`): an input's intended send time → the first
    /// state from the server that echoes it.
    Rtt,
    /// Time between a player's consecutive input sends (Space Ape's `client-interval`).
    ClientInterval,
    /// `POST /v2/rooms`: intended → created.
    RoomCreate,
    /// `GET /v2/rooms/{id}/connection`: intended → connection info received.
    RoomLookup,
    /// Chat join: request sent → channel answered.
    ChatJoin,
    /// Chat message: intended send time → the sender's ack.
    ChatAck,
    /// Chat message: intended send time (carried in the message) → received by a member.
    ChatDelivery,
    /// `world_subscribe` (and each pan): intended → the box's snapshot received.
    WorldSubscribe,
    /// A world update: the server's tick time (carried in the state) → received.
    WorldUpdate,
    /// A game server's relay (`protocol = "lines"`): a line's intended send time on one of a
    /// player's connections (carried in the line) → its arrival on another.
    Relay,
}

impl Metric {
    pub const ALL: [Metric; 16] = [
        Metric::Auth,
        Metric::Connect,
        Metric::Ping,
        Metric::ClientLag,
        Metric::Matchmake,
        Metric::Join,
        Metric::Rtt,
        Metric::ClientInterval,
        Metric::RoomCreate,
        Metric::RoomLookup,
        Metric::ChatJoin,
        Metric::ChatAck,
        Metric::ChatDelivery,
        Metric::WorldSubscribe,
        Metric::WorldUpdate,
        Metric::Relay,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Auth => "auth",
            Metric::Connect => "connect",
            Metric::Ping => "ping",
            Metric::ClientLag => "client_lag",
            Metric::Matchmake => "matchmake",
            Metric::Join => "join",
            Metric::Rtt => "RTT",
            Metric::ClientInterval => "client-interval",
            Metric::RoomCreate => "room_create",
            Metric::RoomLookup => "room_lookup",
            Metric::ChatJoin => "chat_join",
            Metric::ChatAck => "chat_ack",
            Metric::ChatDelivery => "chat_delivery",
            Metric::WorldSubscribe => "world_subscribe",
            Metric::WorldUpdate => "world_update",
            Metric::Relay => "relay",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Event counters. In a [`Tick`] they are the deltas of one second; elsewhere, totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Counters {
    /// Players that started their steps.
    pub arrivals: u64,
    /// Requests and messages sent (auth requests, upgrades, pings, closes).
    pub sends: u64,
    /// Responses and messages received.
    pub receives: u64,
    /// Realtime sockets opened.
    pub connects: u64,
    /// World updates received, and their bytes (the frames as received).
    pub world_states: u64,
    pub world_bytes: u64,
    /// Realtime sockets closed, for any reason.
    pub disconnects: u64,
    /// Failures of any kind (see the `errors` map for the kinds).
    pub errors: u64,
    /// Closes at the end of the run that the server did not answer with a close frame (it
    /// dropped the connection instead). Not a player failure, but a protocol fault to fix.
    pub closes_unanswered: u64,
    /// Chat messages sent.
    pub chat_sent: u64,
    /// Chat messages acknowledged to their sender.
    pub chat_acked: u64,
    /// Chat messages received by members (each message once per member, the sender included).
    pub chat_delivered: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.arrivals += o.arrivals;
        self.sends += o.sends;
        self.receives += o.receives;
        self.connects += o.connects;
        self.disconnects += o.disconnects;
        self.errors += o.errors;
        self.closes_unanswered += o.closes_unanswered;
        self.chat_sent += o.chat_sent;
        self.chat_acked += o.chat_acked;
        self.chat_delivered += o.chat_delivered;
        self.world_states += o.world_states;
        self.world_bytes += o.world_bytes;
    }
}

/// One worker's measurements, owned by its single-threaded runtime.
///
/// It holds only the current second: its samples at run precision (3 significant digits) and its
/// counters, taken and cleared every second by [`Recorder::take_window`]. The run's figures are
/// the coordinator's sum of those seconds, so nothing a worker measured exists anywhere but in
/// what it has shipped, or in the second it is still filling.
#[derive(Debug)]
pub struct Recorder {
    window: Vec<Sketch>,
    pub window_counters: Counters,
    /// Failures by kind during the current second.
    window_errors: BTreeMap<String, u64>,
    /// Open realtime sockets right now.
    pub ccu: u64,
    /// The most sockets open at once.
    pub peak_ccu: u64,
    pub successful: u64,
    pub failed: u64,
    /// Latency metrics named at run time (one per server function of an `rpc` step): name and
    /// current-second sketch. A handful at most, so a list.
    named: Vec<(String, Sketch)>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            window: Metric::ALL
                .iter()
                .map(|_| Sketch::new(Precision::Run))
                .collect(),
            window_counters: Counters::default(),
            window_errors: BTreeMap::new(),
            ccu: 0,
            peak_ccu: 0,
            successful: 0,
            failed: 0,
            named: Vec::new(),
        }
    }
}

impl Recorder {
    /// Records a latency in the current second.
    pub fn latency(&mut self, metric: Metric, d: std::time::Duration) {
        self.window[metric.index()].record_duration(d);
    }

    /// Records a latency of a metric named at run time (e.g. `rpc_wallet_spend`).
    pub fn latency_named(&mut self, name: &str, d: std::time::Duration) {
        let at = match self.named.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None => {
                self.named
                    .push((name.to_string(), Sketch::new(Precision::Run)));
                self.named.len() - 1
            }
        };
        self.named[at].1.record_duration(d);
    }

    /// Bumps one counter of the current second.
    pub fn count(&mut self, f: impl Fn(&mut Counters)) {
        f(&mut self.window_counters);
    }

    /// Counts a failure of the given kind (`http_500`, `ws_close_1001`, `ping_timeout`…).
    pub fn failure(&mut self, kind: &str) {
        self.count(|c| c.errors += 1);
        *self.window_errors.entry(kind.to_string()).or_insert(0) += 1;
    }

    /// Takes the current second's figures and starts a new second.
    pub fn take_window(&mut self, t: u64) -> Tick {
        let mut hist: BTreeMap<String, String> = Metric::ALL
            .iter()
            .zip(self.window.iter_mut())
            .filter(|(_, s)| !s.is_empty())
            .map(|(m, s)| {
                let encoded = s.encode();
                s.reset();
                (m.name().to_string(), encoded)
            })
            .collect();
        for (name, window) in self.named.iter_mut().filter(|(_, w)| !w.is_empty()) {
            hist.insert(name.clone(), window.encode());
            window.reset();
        }
        Tick {
            t,
            ccu: self.ccu,
            peak_ccu: self.peak_ccu,
            counters: std::mem::take(&mut self.window_counters),
            errors: std::mem::take(&mut self.window_errors),
            sketches: hist,
            cpu_s: 0.0,
            rss_kb: 0,
        }
    }
}

/// One second of one worker, sent as it ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tick {
    /// Seconds since the run start: this tick covers [t, t + 1).
    pub t: u64,
    /// Open sockets at the end of the second.
    pub ccu: u64,
    /// The most sockets this worker has held at once so far in the run.
    #[serde(default)]
    pub peak_ccu: u64,
    pub counters: Counters,
    /// Failures by kind during the second (they add up to `counters.errors`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    /// The second's samples by metric, at run precision: added up, they are the run's sketches;
    /// reduced to window precision, they are the second's row of the time series.
    #[serde(default)]
    pub sketches: BTreeMap<String, String>,
    /// CPU time the worker process used during the second.
    #[serde(default)]
    pub cpu_s: f64,
    /// Resident memory of the worker process at the end of the second, KiB.
    #[serde(default)]
    pub rss_kb: u64,
}

/// A worker's final account of its players and of itself. Its samples, counters and failures
/// are not repeated here: they all travelled in its ticks (its last tick, sent just before this,
/// holds the seconds after the run's end).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkerResult {
    pub index: u64,
    /// Players assigned to this worker by the schedule.
    pub players: u64,
    pub successful: u64,
    pub failed: u64,
    /// Players that never started because the run was stopped early.
    pub skipped: u64,
    /// Resident memory before any player started, KiB.
    pub rss_baseline_kb: u64,
    pub rss_peak_kb: u64,
    /// Highest number of sockets this worker held at once.
    pub peak_ccu: u64,
    /// Total CPU seconds the worker process used.
    pub cpu_s: f64,
    /// Source address the worker bound its sockets to, if any.
    pub source_ip: Option<String>,
    /// True when the worker was stopped before the schedule's end.
    pub aborted: bool,
}

/// What one worker streamed, as the coordinator counted it into the run: its share of the
/// report's figures, and what is known of a worker lost before its [`WorkerResult`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Streamed {
    /// Samples by metric.
    pub counts: BTreeMap<String, u64>,
    pub counters: Counters,
    /// Seconds streamed: one past the last second received (0 before the first).
    pub seconds: u64,
    /// The most sockets it held at once, by its last tick.
    pub peak_ccu: u64,
    /// Its highest resident memory at the end of a second, KiB.
    pub rss_peak_kb: u64,
    /// CPU seconds over the seconds streamed.
    pub cpu_s: f64,
}

impl Streamed {
    /// Adds a tick, whose samples by metric [`Aggregate::add_tick`] counted.
    pub fn add(&mut self, tick: &Tick, counts: &BTreeMap<String, u64>) {
        for (name, n) in counts {
            *self.counts.entry(name.clone()).or_insert(0) += n;
        }
        self.counters.add(&tick.counters);
        self.seconds = self.seconds.max(tick.t + 1);
        self.peak_ccu = self.peak_ccu.max(tick.peak_ccu).max(tick.ccu);
        self.rss_peak_kb = self.rss_peak_kb.max(tick.rss_kb);
        self.cpu_s += tick.cpu_s;
    }
}

/// One second of the merged time series.
#[derive(Debug, Clone, Default)]
pub struct SecondAgg {
    pub ccu: u64,
    pub counters: Counters,
    pub sketches: BTreeMap<String, Sketch>,
    pub cpu_s: f64,
    pub rss_kb: u64,
    /// How many workers (or reports) contributed to this second.
    pub reporters: u64,
}

impl SecondAgg {
    /// Folds one worker's second in, its sketches (decoded, at run precision) reduced to this
    /// row's window precision.
    fn add_tick(&mut self, tick: &Tick, sketches: &[(&String, Sketch)]) -> Result<(), SketchError> {
        self.ccu += tick.ccu;
        self.counters.add(&tick.counters);
        self.cpu_s += tick.cpu_s;
        self.rss_kb += tick.rss_kb;
        self.reporters += 1;
        for (name, s) in sketches {
            self.sketches
                .entry(name.to_string())
                .or_insert_with(|| Sketch::new(Precision::Window))
                .merge_coarsened(s)?;
        }
        Ok(())
    }

    /// Folds another aggregate's second in (for `swarm merge`).
    pub fn add(&mut self, o: &SecondAgg) -> Result<(), SketchError> {
        self.ccu += o.ccu;
        self.counters.add(&o.counters);
        self.cpu_s += o.cpu_s;
        self.rss_kb += o.rss_kb;
        self.reporters += o.reporters;
        for (name, s) in &o.sketches {
            merge_into(&mut self.sketches, name, s, Precision::Window)?;
        }
        Ok(())
    }
}

fn merge_into(
    map: &mut BTreeMap<String, Sketch>,
    name: &str,
    s: &Sketch,
    precision: Precision,
) -> Result<(), SketchError> {
    map.entry(name.to_string())
        .or_insert_with(|| Sketch::new(precision))
        .merge(s)
}

/// Everything known about a run so far, from any number of workers or reports.
#[derive(Debug, Clone, Default)]
pub struct Aggregate {
    pub players: u64,
    pub successful: u64,
    pub failed: u64,
    pub skipped: u64,
    pub counters: Counters,
    pub errors: BTreeMap<String, u64>,
    pub sketches: BTreeMap<String, Sketch>,
    pub seconds: BTreeMap<u64, SecondAgg>,
}

impl Aggregate {
    /// Folds a worker's second in: into the run's figures and into that second's row. Returns
    /// the second's samples by metric (what the run's counts grew by).
    ///
    /// All or nothing: a tick with a sketch that does not decode, or is not at run precision,
    /// changes nothing.
    pub fn add_tick(&mut self, tick: &Tick) -> Result<BTreeMap<String, u64>, SketchError> {
        let sketches = tick
            .sketches
            .iter()
            .map(|(name, enc)| match Sketch::decode(enc)? {
                s if s.precision() == Some(Precision::Run) => Ok((name, s)),
                _ => Err(SketchError::Incompatible),
            })
            .collect::<Result<Vec<_>, SketchError>>()?;
        self.seconds
            .entry(tick.t)
            .or_default()
            .add_tick(tick, &sketches)?;
        self.counters.add(&tick.counters);
        for (kind, n) in &tick.errors {
            *self.errors.entry(kind.clone()).or_insert(0) += n;
        }
        let mut counts = BTreeMap::new();
        for (name, s) in &sketches {
            counts.insert(name.to_string(), s.count());
            merge_into(&mut self.sketches, name, s, Precision::Run)?;
        }
        Ok(counts)
    }

    /// Folds a worker's final result in: its players' outcomes (its samples and counters came
    /// with its ticks).
    pub fn add_result(&mut self, r: &WorkerResult) {
        self.add_outcomes([r.players, r.successful, r.failed, r.skipped]);
    }

    /// Adds players, successful, failed and skipped (in that order).
    fn add_outcomes(&mut self, [players, successful, failed, skipped]: [u64; 4]) {
        self.players += players;
        self.successful += successful;
        self.failed += failed;
        self.skipped += skipped;
    }

    /// Counts the `players` of a worker lost before its result as failed, so a lost worker can
    /// never make a run look better. `already_failed` of them failed before it was lost, and
    /// their failures (by kind) came with its ticks; the others are counted as failures of kind
    /// `kind`. So failures by kind still add up to the failed players, each counted once.
    pub fn add_lost(&mut self, players: u64, already_failed: u64, kind: &str) {
        let others = players.saturating_sub(already_failed);
        self.players += players;
        self.failed += players;
        self.counters.errors += others;
        *self.errors.entry(kind.to_string()).or_insert(0) += others;
    }

    /// Folds another aggregate in (several machines' reports).
    pub fn merge(&mut self, o: &Aggregate) -> Result<(), SketchError> {
        self.add_outcomes([o.players, o.successful, o.failed, o.skipped]);
        self.counters.add(&o.counters);
        for (k, v) in &o.errors {
            *self.errors.entry(k.clone()).or_insert(0) += v;
        }
        for (name, s) in &o.sketches {
            merge_into(&mut self.sketches, name, s, Precision::Run)?;
        }
        for (t, sec) in &o.seconds {
            self.seconds.entry(*t).or_default().add(sec)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A worker's three seconds: `n` pings and sends each, and one `http_500` failure.
    fn worker(seed: u64, n: u64) -> (Vec<Tick>, WorkerResult) {
        let mut r = Recorder::default();
        let mut ticks = Vec::new();
        for t in 0..3 {
            for k in 0..n {
                r.latency(Metric::Ping, Duration::from_micros(100 + (k * seed) % 5000));
                r.count(|c| c.sends += 1);
            }
            r.failure("http_500");
            r.ccu = n;
            r.peak_ccu = n;
            ticks.push(r.take_window(t));
        }
        let result = WorkerResult {
            players: n,
            successful: n - 3,
            failed: 3,
            ..Default::default()
        };
        (ticks, result)
    }

    #[test]
    fn aggregates_merge_in_any_order_to_the_same_totals() {
        let workers: Vec<_> = [(3, 100), (7, 50), (11, 10)]
            .into_iter()
            .map(|(s, n)| worker(s, n))
            .collect();
        let build = |order: &[usize]| {
            let mut a = Aggregate::default();
            for &i in order {
                let (ticks, result) = &workers[i];
                ticks.iter().for_each(|t| {
                    a.add_tick(t).expect("tick");
                });
                a.add_result(result);
            }
            a
        };
        let one = build(&[0, 1, 2]);
        let two = build(&[2, 0, 1]);
        // Merging per-worker aggregates pairwise gives the same as folding all in one.
        let mut three = build(&[1]);
        let mut rest = build(&[2]);
        rest.merge(&build(&[0])).expect("merge");
        three.merge(&rest).expect("merge");
        for a in [&two, &three] {
            assert_eq!(a.players, 160);
            assert_eq!(a.successful, one.successful);
            assert_eq!(a.errors.get("http_500"), Some(&9));
            assert_eq!(a.counters, one.counters);
            assert_eq!(a.sketches["ping"].summary(), one.sketches["ping"].summary());
            assert_eq!(a.seconds.len(), 3);
            for (t, sec) in &a.seconds {
                let o = &one.seconds[t];
                assert_eq!(sec.ccu, 160);
                assert_eq!(sec.counters, o.counters);
                assert_eq!(sec.sketches["ping"].summary(), o.sketches["ping"].summary());
            }
        }
        assert_eq!(one.counters.sends, 3 * 160);
        assert_eq!(one.counters.errors, 9);
    }

    /// The run's figures are the sum of the seconds, for a worker that finished and for one lost
    /// after its second second alike: counts by metric, counters and failures agree with the
    /// time series and with the workers' own shares ([`Streamed`]), and the run's sketch holds
    /// every sample at run precision (as one sketch recording them all would).
    #[test]
    fn the_run_is_the_sum_of_its_seconds_even_for_a_lost_worker() {
        let (kept_ticks, kept_result) = worker(3, 100);
        let (lost_ticks, _) = worker(7, 40);
        let mut agg = Aggregate::default();
        let (mut kept, mut lost) = (Streamed::default(), Streamed::default());
        for tick in &kept_ticks {
            let counts = agg.add_tick(tick).expect("tick");
            kept.add(tick, &counts);
        }
        agg.add_result(&kept_result);
        for tick in &lost_ticks[..2] {
            let counts = agg.add_tick(tick).expect("tick");
            lost.add(tick, &counts);
        }
        agg.add_lost(40, lost.counters.errors, "worker_lost");

        let series: u64 = agg
            .seconds
            .values()
            .map(|s| s.sketches["ping"].count())
            .sum();
        assert_eq!(agg.sketches["ping"].count(), 3 * 100 + 2 * 40);
        assert_eq!(agg.sketches["ping"].count(), series);
        assert_eq!(kept.counts["ping"] + lost.counts["ping"], series);
        assert_eq!((lost.seconds, lost.peak_ccu), (2, 40));
        let sends: u64 = agg.seconds.values().map(|s| s.counters.sends).sum();
        assert_eq!(agg.counters.sends, sends);
        // Failures: the lost worker's two streamed ones under their kind, its 38 other players
        // under worker_lost; by kind they add up to the failed players.
        assert_eq!(agg.errors["http_500"], 3 + 2);
        assert_eq!(agg.errors["worker_lost"], 38);
        assert_eq!(agg.failed, 3 + 40);
        assert_eq!(agg.errors.values().sum::<u64>(), agg.failed);
        assert_eq!(agg.counters.errors, agg.failed);

        let mut one = Sketch::new(Precision::Run);
        for (seed, n, seconds) in [(3, 100, 3), (7, 40, 2)] {
            for _ in 0..seconds {
                for k in 0..n {
                    one.record(100 + (k * seed) % 5000);
                }
            }
        }
        assert_eq!(agg.sketches["ping"].summary(), one.summary());
    }

    #[test]
    fn a_tick_that_does_not_decode_changes_nothing() {
        let (mut ticks, _) = worker(3, 10);
        let mut agg = Aggregate::default();
        agg.add_tick(&ticks[0]).expect("tick");
        let before = (agg.counters.clone(), agg.sketches["ping"].count());
        ticks[1]
            .sketches
            .insert("auth".into(), "not a sketch".into());
        assert!(agg.add_tick(&ticks[1]).is_err());
        // A window-precision sketch where run precision is due is refused too.
        let mut window = Sketch::new(Precision::Window);
        window.record(5);
        ticks[2].sketches.insert("auth".into(), window.encode());
        assert!(agg.add_tick(&ticks[2]).is_err());
        assert_eq!((agg.counters.clone(), agg.sketches["ping"].count()), before);
        assert_eq!(agg.seconds.len(), 1);
    }

    #[test]
    fn window_resets_each_second() {
        let mut r = Recorder::default();
        r.latency(Metric::Auth, Duration::from_millis(3));
        r.failure("http_500");
        let first = r.take_window(0);
        assert!(first.sketches.contains_key("auth"));
        assert_eq!(first.errors["http_500"], 1);
        let second = r.take_window(1);
        assert!(second.sketches.is_empty());
        assert!(second.errors.is_empty());
        assert_eq!(second.counters, Counters::default());
    }

    #[test]
    fn lost_workers_count_as_failures() {
        let mut a = Aggregate::default();
        a.add_lost(42, 0, "worker_lost");
        assert_eq!((a.players, a.failed, a.errors["worker_lost"]), (42, 42, 42));
    }
}
