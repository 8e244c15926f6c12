//! The status history: chosen metrics of this node sampled once a second from its Prometheus
//! registry, kept in memory for an hour at 1 s and for a week at 1 min, so that a reload of the
//! page, or a second operator, sees the same past. A series is one statistic of one label set:
//! a gauge's value (or, for a gauge holding a time, its age), a counter's rate per second, a
//! histogram's rate or its p50/p99 over the second (from the buckets' increase, as Prometheus' `histogram_quantile` computes it).
//!
//! Memory is bounded: each series holds two rings of `f32` ([`SERIES_BYTES`]), and at most
//! `console.history_max_series` series are kept; label values seen past the cap are counted,
//! not charted.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus::proto::{MetricFamily, MetricType};
use prometheus::{IntCounter, Registry};
use serde::Serialize;

/// Points kept at 1 s: an hour.
pub const SECOND_POINTS: usize = 3600;
/// Points kept at 1 min: 7 days.
pub const MINUTE_POINTS: usize = 7 * 24 * 60;
/// What one series costs in its rings.
pub const SERIES_BYTES: usize = (SECOND_POINTS + MINUTE_POINTS) * std::mem::size_of::<f32>();

/// What a series holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stat {
    /// A gauge's value.
    Value,
    /// A counter's (or a histogram's count's) increase per second.
    Rate,
    /// A histogram's median over the last second.
    P50,
    /// A histogram's 99th percentile over the last second.
    P99,
    /// Seconds since the time a gauge holds (Unix seconds): how old what it dates is.
    Age,
}

/// A metric family charted, and how.
struct Tracked {
    /// The family's name without the registry's `muster_` prefix.
    name: &'static str,
    stats: &'static [Stat],
    /// Each label set its own series; false: every label set summed into one.
    per_label: bool,
}

const fn tracked(name: &'static str, stats: &'static [Stat], per_label: bool) -> Tracked {
    Tracked {
        name,
        stats,
        per_label,
    }
}

use Stat::{Age, Rate, Value, P50, P99};

/// What the status page charts.
const TRACKED: &[Tracked] = &[
    tracked("users_online", &[Value], false),
    tracked("sockets_open", &[Value], false),
    tracked("realtime_messages_total", &[Rate], true),
    tracked("rpc_duration_seconds", &[Rate, P50, P99], true),
    tracked("http_request_duration_seconds", &[Rate, P99], false),
    tracked("matches", &[Value], true),
    tracked("match_players", &[Value], false),
    tracked("match_ticks_total", &[Rate], false),
    tracked("match_late_ticks_total", &[Rate], false),
    tracked("matchmaker_tickets", &[Value], false),
    tracked("matchmaker_matched_total", &[Rate], false),
    tracked("matchmaker_wait_seconds", &[P50, P99], false),
    tracked("chat_messages_delivered_total", &[Rate], false),
    tracked("db_group_commit_duration_seconds", &[Rate, P50, P99], false),
    tracked("db_group_commit_size", &[P50, P99], false),
    tracked("db_operation_duration_seconds", &[Rate, P99], false),
    tracked("links_redirects_total", &[Rate], false),
    tracked("links_creates_total", &[Rate], false),
    tracked("world_towers", &[Value], true),
    tracked("world_creeps", &[Value], true),
    tracked("world_subscribers", &[Value], false),
    tracked("world_tick_seconds", &[P50, P99], false),
    tracked("world_checkpoint_seconds", &[Rate, P99], false),
    tracked("world_last_checkpoint_timestamp_seconds", &[Age], true),
    tracked("process_resident_memory_bytes", &[Value], false),
    tracked("process_cpu_seconds_total", &[Rate], false),
];

/// A metric's labels, sorted by name.
type Labels = Vec<(String, String)>;

/// A series' name: the family, its labels (sorted), the statistic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct SeriesKey {
    pub metric: &'static str,
    pub labels: Vec<(String, String)>,
    pub stat: Stat,
}

/// Fixed-size points ending at `last` (a second or a minute number); NaN where nothing was
/// sampled.
struct Ring {
    values: Box<[f32]>,
    /// The time of the newest point; `None` before the first.
    last: Option<i64>,
}

impl Ring {
    fn new(capacity: usize) -> Ring {
        Ring {
            values: vec![f32::NAN; capacity].into_boxed_slice(),
            last: None,
        }
    }

    fn slot(&self, t: i64) -> usize {
        t.rem_euclid(self.values.len() as i64) as usize
    }

    /// Sets the point at `t`; the points between the newest and `t` become gaps.
    fn put(&mut self, t: i64, value: f32) {
        let capacity = self.values.len() as i64;
        match self.last {
            Some(last) if t <= last => {
                if last - t < capacity {
                    let slot = self.slot(t);
                    self.values[slot] = value;
                }
                return;
            }
            Some(last) => {
                for gap in (last + 1).max(t - capacity + 1)..t {
                    let slot = self.slot(gap);
                    self.values[slot] = f32::NAN;
                }
            }
            None => {}
        }
        let slot = self.slot(t);
        self.values[slot] = value;
        self.last = Some(t);
    }

    /// The points after `after` up to `until`, oldest first (gaps as `None`), with the time of
    /// the first.
    fn since(&self, after: i64, until: i64) -> (i64, Vec<Option<f32>>) {
        let capacity = self.values.len() as i64;
        let first = (after + 1).max(until - capacity + 1);
        let points = (first..=until)
            .map(|t| match self.last {
                Some(last) if t <= last && last - t < capacity => {
                    let v = self.values[self.slot(t)];
                    (!v.is_nan()).then_some(v)
                }
                _ => None,
            })
            .collect();
        (first, points)
    }
}

struct Series {
    seconds: Ring,
    minutes: Ring,
    /// The minute being gathered: its number, the sum and count of its points, their max.
    minute: Option<(i64, f64, u32, f32)>,
    stat: Stat,
}

impl Series {
    fn new(stat: Stat) -> Series {
        Series {
            seconds: Ring::new(SECOND_POINTS),
            minutes: Ring::new(MINUTE_POINTS),
            minute: None,
            stat,
        }
    }

    /// Adds the point of second `t`; a minute's point is the mean of its seconds (for a p99
    /// their max: the worst second is what an operator looks for).
    fn put(&mut self, t: i64, value: f32) {
        self.seconds.put(t, value);
        let minute = t.div_euclid(60);
        match &mut self.minute {
            Some((m, sum, n, max)) if *m == minute => {
                *sum += f64::from(value);
                *n += 1;
                *max = max.max(value);
            }
            _ => self.minute = Some((minute, f64::from(value), 1, value)),
        }
        if let Some((m, sum, n, max)) = self.minute {
            let point = if self.stat == Stat::P99 {
                max
            } else {
                (sum / f64::from(n)) as f32
            };
            self.minutes.put(m, point);
        }
    }
}

/// What a counter or histogram was at the previous sample, per series source.
#[derive(Clone)]
enum Previous {
    Counter(f64),
    /// The histogram's count and its cumulative bucket counts (upper bound, count).
    Histogram(u64, Vec<(f64, u64)>),
}

#[derive(Default)]
struct Inner {
    series: HashMap<SeriesKey, Series>,
    previous: HashMap<(&'static str, Labels), Previous>,
    /// The second of the previous sample.
    previous_at: Option<i64>,
    /// The second of the first sample (a window never starts before it).
    first_at: Option<i64>,
}

/// Which resolution a query reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Resolution {
    /// 1 s points, up to an hour back.
    Second,
    /// 1 min points, up to 7 days back.
    Minute,
}

/// What a window holds (see [`History::window_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Serialize)]
pub struct WindowQuery {
    pub resolution: Resolution,
    pub after: i64,
    /// Kept points merged into one answer point.
    pub every: i64,
    /// How far back, in seconds (`None`: all that is kept).
    pub span: Option<i64>,
}

/// A group of kept points as one: their mean, or for a p99 their max; `None` when none was kept.
fn merge_points(group: &[Option<f32>], stat: Stat) -> Option<f32> {
    let values = group.iter().flatten();
    if stat == Stat::P99 {
        return values.copied().reduce(f32::max);
    }
    let (sum, n) = values.fold((0.0f64, 0u32), |(sum, n), v| (sum + f64::from(*v), n + 1));
    (n > 0).then(|| (sum / f64::from(n)) as f32)
}

/// One series of a query's answer.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesPoints {
    #[serde(flatten)]
    pub key: SeriesKey,
    pub points: Vec<Option<f32>>,
}

/// A query's answer: every series' points from `start` (Unix seconds) every `step` seconds.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    pub start: i64,
    pub step: i64,
    /// The time of the last point.
    pub end: i64,
    pub series: Vec<SeriesPoints>,
}

pub struct History {
    registry: Registry,
    prefix: &'static str,
    max_series: usize,
    inner: Mutex<Inner>,
    /// Points not charted because the cap on series was reached.
    pub dropped: IntCounter,
}

impl History {
    /// Samples `registry` (whose names start with `muster_`), where it also registers
    /// `muster_console_series_dropped_total`.
    pub fn new(registry: Registry, max_series: usize) -> History {
        let dropped = crate::base::metrics::register(
            &registry,
            IntCounter::new(
                "console_series_dropped_total",
                "Status-history points not kept because console.history_max_series was reached.",
            ),
        );
        History {
            registry,
            prefix: "muster_",
            max_series,
            inner: Mutex::new(Inner::default()),
            dropped,
        }
    }

    /// Samples every second until the process ends (the task is aborted with the server).
    pub async fn run(self: std::sync::Arc<Self>) {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            every.tick().await;
            self.sample(crate::base::clock::now_secs());
        }
    }

    /// Reads the registry and adds the point of second `now` to every tracked series.
    pub fn sample(&self, now: i64) {
        let families = self.registry.gather();
        let mut inner = self.inner.lock();
        let elapsed = inner.previous_at.map(|at| (now - at).max(1) as f64);
        inner.previous_at = Some(now);
        inner.first_at.get_or_insert(now);
        for family in &families {
            let Some(name) = family.name().strip_prefix(self.prefix) else {
                continue;
            };
            let Some(tracked) = TRACKED.iter().find(|t| t.name == name) else {
                continue;
            };
            for (labels, reading) in readings(family, tracked.per_label) {
                self.add(&mut inner, tracked, labels, reading, now, elapsed);
            }
        }
    }

    fn add(
        &self,
        inner: &mut Inner,
        tracked: &Tracked,
        labels: Vec<(String, String)>,
        reading: Previous,
        now: i64,
        elapsed: Option<f64>,
    ) {
        let source = (tracked.name, labels);
        // A label set that appears between two samples started from zero since the last one.
        let before = inner
            .previous
            .insert(source.clone(), reading.clone())
            .or_else(|| elapsed.map(|_| reading.zero()));
        for &stat in tracked.stats {
            let value = match (stat, &reading, &before, elapsed) {
                (Stat::Value, Previous::Counter(v), _, _) => Some(*v),
                (Stat::Age, Previous::Counter(v), _, _) => Some((now as f64 - v).max(0.0)),
                (Stat::Rate, Previous::Counter(v), Some(Previous::Counter(b)), Some(dt)) => {
                    Some((v - b).max(0.0) / dt)
                }
                (
                    Stat::Rate,
                    Previous::Histogram(c, _),
                    Some(Previous::Histogram(b, _)),
                    Some(dt),
                ) => Some(c.saturating_sub(*b) as f64 / dt),
                (
                    Stat::P50 | Stat::P99,
                    Previous::Histogram(_, now_b),
                    Some(Previous::Histogram(_, was)),
                    _,
                ) => {
                    let q = if stat == Stat::P50 { 0.5 } else { 0.99 };
                    quantile(q, now_b, was)
                }
                _ => None,
            };
            let Some(value) = value else { continue };
            let key = SeriesKey {
                metric: tracked.name,
                labels: source.1.clone(),
                stat,
            };
            let full = inner.series.len() >= self.max_series;
            match inner.series.get_mut(&key) {
                Some(series) => series.put(now, value as f32),
                None if full => {
                    self.dropped.inc();
                }
                None => {
                    let mut series = Series::new(stat);
                    series.put(now, value as f32);
                    inner.series.insert(key, series);
                }
            }
        }
    }

    /// Every series' points after `after` (Unix seconds), one per second or minute.
    pub fn window(&self, resolution: Resolution, after: i64) -> Window {
        self.window_with(WindowQuery {
            resolution,
            after,
            every: 1,
            span: None,
        })
    }

    /// Every series' points as `query` asks: after `query.after` (Unix seconds; 0 reads all that
    /// is kept), at most `query.span` seconds back, each answer point merging `query.every`
    /// kept points (their mean; for a p99 their max) — a chart 720 pixels wide needs no more
    /// than 720 points. Only whole groups are answered, so a poll after the last `end` gets the
    /// groups completed since.
    pub fn window_with(&self, query: WindowQuery) -> Window {
        let inner = self.inner.lock();
        let step = match query.resolution {
            Resolution::Second => 1,
            Resolution::Minute => 60,
        };
        let every = query.every.clamp(1, 3600);
        let last = inner.previous_at.unwrap_or(0).div_euclid(step);
        // The last whole group ends here.
        let end = (last + 1).div_euclid(every) * every - 1;
        let kept_from = inner.first_at.unwrap_or(0).div_euclid(step);
        let span_from = query
            .span
            .map_or(i64::MIN, |span| end + 1 - span.div_euclid(step).max(1));
        let capacity = match query.resolution {
            Resolution::Second => SECOND_POINTS,
            Resolution::Minute => MINUTE_POINTS,
        } as i64;
        let from = (query.after.div_euclid(step) + 1)
            .max(kept_from)
            .max(span_from)
            .max(end + 1 - capacity);
        // Groups start at multiples of `every`.
        let from = from.div_euclid(every) * every
            + if from.rem_euclid(every) == 0 {
                0
            } else {
                every
            };
        let mut series: Vec<SeriesPoints> = inner
            .series
            .iter()
            .map(|(key, s)| {
                let ring = match query.resolution {
                    Resolution::Second => &s.seconds,
                    Resolution::Minute => &s.minutes,
                };
                let (_, raw) = ring.since(from - 1, end);
                let points = raw
                    .chunks(every as usize)
                    .map(|group| merge_points(group, s.stat))
                    .collect();
                SeriesPoints {
                    key: key.clone(),
                    points,
                }
            })
            .collect();
        series.sort_by(|a, b| {
            (a.key.metric, &a.key.labels, a.key.stat as u8).cmp(&(
                b.key.metric,
                &b.key.labels,
                b.key.stat as u8,
            ))
        });
        // `from` is within what every ring keeps, so each answers from it.
        Window {
            start: from * step,
            step: step * every,
            end: end * step,
            series,
        }
    }

    /// [`History::window`]'s series from the `from`th (in its order) while they fit in about
    /// `max_bytes` of JSON (at least one), and the index of the next series when some are left:
    /// what one message to another node carries.
    pub fn window_part(
        &self,
        query: WindowQuery,
        from: usize,
        max_bytes: usize,
    ) -> (Window, Option<usize>) {
        let mut window = self.window_with(query);
        let all = std::mem::take(&mut window.series);
        let mut bytes = 0;
        for (i, series) in all.into_iter().enumerate().skip(from) {
            // A point is at most ~12 bytes of JSON ("-1.2345678,"); a key about 100.
            let size = 100 + series.points.len() * 12;
            if !window.series.is_empty() && bytes + size > max_bytes {
                return (window, Some(i));
            }
            bytes += size;
            window.series.push(series);
        }
        (window, None)
    }

    /// Series kept now.
    pub fn series_count(&self) -> usize {
        self.inner.lock().series.len()
    }
}

/// A family's readings: one per label set, or one summing them all.
fn readings(family: &MetricFamily, per_label: bool) -> Vec<(Labels, Previous)> {
    let kind = family.get_field_type();
    let mut out: Vec<(Labels, Previous)> = Vec::new();
    for metric in family.get_metric() {
        let labels: Labels = if per_label {
            let mut labels: Vec<_> = metric
                .get_label()
                .iter()
                .map(|l| (l.name().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            labels
        } else {
            Vec::new()
        };
        let reading = match kind {
            MetricType::COUNTER => Previous::Counter(metric.get_counter().get_value()),
            MetricType::GAUGE => Previous::Counter(metric.get_gauge().get_value()),
            MetricType::HISTOGRAM => {
                let h = metric.get_histogram();
                Previous::Histogram(
                    h.get_sample_count(),
                    h.get_bucket()
                        .iter()
                        .map(|b| (b.upper_bound(), b.cumulative_count()))
                        .collect(),
                )
            }
            _ => continue,
        };
        match out.iter_mut().find(|(l, _)| *l == labels) {
            Some((_, sum)) => merge(sum, reading),
            None => out.push((labels, reading)),
        }
    }
    out
}

impl Previous {
    /// The same reading with nothing counted yet.
    fn zero(&self) -> Previous {
        match self {
            Previous::Counter(_) => Previous::Counter(0.0),
            Previous::Histogram(_, buckets) => {
                Previous::Histogram(0, buckets.iter().map(|&(bound, _)| (bound, 0)).collect())
            }
        }
    }
}

/// Adds `other` into `sum` (histograms with the same buckets).
fn merge(sum: &mut Previous, other: Previous) {
    match (sum, other) {
        (Previous::Counter(a), Previous::Counter(b)) => *a += b,
        (Previous::Histogram(count, buckets), Previous::Histogram(c, other)) => {
            *count += c;
            for ((_, a), (_, b)) in buckets.iter_mut().zip(other) {
                *a += b;
            }
        }
        _ => {}
    }
}

/// The `q` quantile of what fell into the buckets between two readings, interpolated within a
/// bucket as Prometheus does; `None` when nothing fell.
fn quantile(q: f64, now: &[(f64, u64)], before: &[(f64, u64)]) -> Option<f64> {
    let increase: Vec<(f64, u64)> = now
        .iter()
        .zip(before.iter().map(|b| b.1).chain(std::iter::repeat(0)))
        .map(|(&(bound, n), b)| (bound, n.saturating_sub(b)))
        .collect();
    let total = increase.last()?.1;
    // Observations past the last bucket are in the count, not the buckets: use the buckets'
    // total, which the last finite bucket holds.
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut lower = 0.0;
    let mut below = 0u64;
    for &(bound, n) in &increase {
        if n as f64 >= rank {
            let inside = (n - below) as f64;
            let into = if inside > 0.0 {
                (rank - below as f64) / inside
            } else {
                1.0
            };
            return Some(lower + (bound - lower) * into);
        }
        lower = bound;
        below = n;
    }
    Some(lower)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts};

    fn registry() -> (Registry, IntGauge, IntCounterVec, HistogramVec) {
        let registry = Registry::new_custom(Some("muster".into()), None).unwrap();
        let online = IntGauge::new("users_online", "u").unwrap();
        let kinds =
            IntCounterVec::new(Opts::new("realtime_messages_total", "m"), &["kind"]).unwrap();
        let rpc = HistogramVec::new(
            HistogramOpts::new("rpc_duration_seconds", "r").buckets(vec![0.001, 0.01, 0.1]),
            &["function"],
        )
        .unwrap();
        registry.register(Box::new(online.clone())).unwrap();
        registry.register(Box::new(kinds.clone())).unwrap();
        registry.register(Box::new(rpc.clone())).unwrap();
        (registry, online, kinds, rpc)
    }

    fn points<'a>(window: &'a Window, metric: &str, stat: Stat) -> Vec<&'a SeriesPoints> {
        window
            .series
            .iter()
            .filter(|s| s.key.metric == metric && s.key.stat == stat)
            .collect()
    }

    #[test]
    fn gauges_rates_and_quantiles_per_second() {
        let (registry, online, kinds, rpc) = registry();
        let history = History::new(registry, 100);
        online.set(5);
        history.sample(1000);
        online.set(7);
        kinds.with_label_values(&["channel_join"]).inc_by(30);
        kinds.with_label_values(&["rpc"]).inc_by(10);
        for _ in 0..99 {
            rpc.with_label_values(&["spend"]).observe(0.005);
        }
        rpc.with_label_values(&["spend"]).observe(0.05);
        history.sample(1002);
        let window = history.window(Resolution::Second, 0);
        assert_eq!(window.end, 1002);
        let online = points(&window, "users_online", Stat::Value);
        assert_eq!(online.len(), 1);
        let tail = &online[0].points[online[0].points.len() - 3..];
        assert_eq!(
            tail,
            &[Some(5.0), None, Some(7.0)],
            "a gap where no sample was"
        );
        let kinds = points(&window, "realtime_messages_total", Stat::Rate);
        assert_eq!(kinds.len(), 2, "one series per kind");
        let join = kinds
            .iter()
            .find(|s| s.key.labels == vec![("kind".into(), "channel_join".into())])
            .unwrap();
        assert_eq!(join.points.last(), Some(&Some(15.0)), "30 in 2 s");
        let p50 = points(&window, "rpc_duration_seconds", Stat::P50)[0];
        let p99 = points(&window, "rpc_duration_seconds", Stat::P99)[0];
        let (p50, p99) = (
            p50.points.last().unwrap().unwrap(),
            p99.points.last().unwrap().unwrap(),
        );
        assert!((0.001..=0.01).contains(&p50), "{p50}");
        assert!(
            (0.001..=0.01).contains(&p99),
            "99 of 100 in the 1–10 ms bucket: {p99}"
        );
        // Polling after the last point reads nothing new.
        let next = history.window(Resolution::Second, window.end);
        assert!(next.series.iter().all(|s| s.points.is_empty()));
    }

    #[test]
    fn minutes_average_their_seconds_and_an_hour_is_kept() {
        let (registry, online, _, _) = registry();
        let history = History::new(registry, 100);
        let start = 6000 * 60;
        for s in 0..(SECOND_POINTS as i64 + 120) {
            online.set(s % 60);
            history.sample(start + s);
        }
        let seconds = history.window(Resolution::Second, 0);
        let online_s = points(&seconds, "users_online", Stat::Value)[0];
        assert_eq!(online_s.points.len(), SECOND_POINTS, "an hour at 1 s");
        let minutes = history.window(Resolution::Minute, 0);
        let online_m = points(&minutes, "users_online", Stat::Value)[0];
        assert_eq!(minutes.step, 60);
        assert!(online_m.points.len() >= 60);
        assert_eq!(
            online_m.points[online_m.points.len() - 2],
            Some(29.5),
            "mean of 0..59"
        );
    }

    #[test]
    fn points_are_grouped_whole_and_a_span_bounds_the_window() {
        let (registry, online, _, _) = registry();
        let history = History::new(registry, 100);
        // Seconds 1000..=1011: values 0..=11.
        for s in 0..12 {
            online.set(s);
            history.sample(1000 + s);
        }
        let query = |after, every, span| {
            history.window_with(WindowQuery {
                resolution: Resolution::Second,
                after,
                every,
                span,
            })
        };
        let grouped = query(0, 5, None);
        assert_eq!((grouped.start, grouped.step, grouped.end), (1000, 5, 1009));
        let online_points = &points(&grouped, "users_online", Stat::Value)[0].points;
        assert_eq!(
            online_points,
            &[Some(2.0), Some(7.0)],
            "means of 0..4 and 5..9; 10..11 not whole yet"
        );
        // A poll after the last end gets nothing until the next group is whole.
        let next = query(grouped.end, 5, None);
        assert!(points(&next, "users_online", Stat::Value)[0]
            .points
            .is_empty());
        let spanned = query(0, 1, Some(3));
        assert_eq!(spanned.start, 1009);
        assert_eq!(
            points(&spanned, "users_online", Stat::Value)[0].points,
            vec![Some(9.0), Some(10.0), Some(11.0)]
        );
    }

    #[test]
    fn series_past_the_cap_are_counted_not_kept() {
        let (registry, _, kinds, _) = registry();
        let history = History::new(registry, 3);
        for k in 0..10 {
            kinds.with_label_values(&[&format!("k{k}")]).inc();
        }
        history.sample(10);
        history.sample(11);
        assert_eq!(history.series_count(), 3);
        assert!(history.dropped.get() > 0);
    }

    #[test]
    fn a_gauge_holding_a_time_is_charted_as_its_age() {
        let (registry, _, _, _) = registry();
        let last = prometheus::IntGaugeVec::new(
            Opts::new("world_last_checkpoint_timestamp_seconds", "c"),
            &["shard"],
        )
        .unwrap();
        registry.register(Box::new(last.clone())).unwrap();
        let history = History::new(registry, 100);
        last.with_label_values(&["0"]).set(1_000);
        last.with_label_values(&["1"]).set(1_003);
        history.sample(1_005);
        history.sample(1_006);
        let window = history.window(Resolution::Second, 0);
        let ages = points(
            &window,
            "world_last_checkpoint_timestamp_seconds",
            Stat::Age,
        );
        let by_shard: Vec<(&str, Vec<Option<f32>>)> = ages
            .iter()
            .map(|s| (s.key.labels[0].1.as_str(), s.points.clone()))
            .collect();
        assert!(
            by_shard.contains(&("0", vec![Some(5.0), Some(6.0)])),
            "{by_shard:?}"
        );
        assert!(
            by_shard.contains(&("1", vec![Some(2.0), Some(3.0)])),
            "{by_shard:?}"
        );
    }

    #[test]
    fn ring_points_survive_only_their_capacity() {
        let mut ring = Ring::new(4);
        ring.put(10, 1.0);
        ring.put(11, 2.0);
        ring.put(20, 3.0);
        let (first, points) = ring.since(0, 20);
        assert_eq!(first, 17);
        assert_eq!(points, vec![None, None, None, Some(3.0)]);
    }
}
