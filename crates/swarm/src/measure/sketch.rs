//! Mergeable latency sketches.
//!
//! Every latency swarm measures goes into a [`Sketch`]: an HDR histogram of microseconds with a
//! fixed range (1 µs to 1 h) and a fixed precision, so that two sketches from two workers, or two
//! machines, always merge exactly: merging is adding bucket counts, which is associative and
//! commutative, and a percentile read from the merged sketch is the percentile of all the values
//! recorded anywhere, not an average of percentiles.
//!
//! Two precisions exist. [`Precision::Run`] (3 significant digits, ≤ 0.1 % value error) is used
//! for the whole-run metrics that end up in the report; it costs ~180 KiB per metric per worker,
//! whatever the number of samples. [`Precision::Window`] (2 significant digits, ≤ 1 % value
//! error) is used for the per-second windows of the time series, where a few KiB each matter
//! because a long run has many seconds.
//!
//! A worker ships each second's samples once, at run precision; the coordinator adds them to
//! the run's sketches and, reduced with [`Sketch::merge_coarsened`], to that second's window.
//! The reduction is exact: every bucket of a run sketch lies inside one bucket of a window
//! sketch, so the window holds exactly what recording the samples into it would have given.
//!
//! On the wire (worker → coordinator, report → `swarm merge`) a sketch travels as base64 of the
//! HdrHistogram V2 compressed encoding, which only carries non-empty buckets.

use std::io::Cursor;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest value a sketch can hold: one hour, in microseconds. Larger values are clamped.
pub const MAX_MICROS: u64 = 3_600_000_000;

/// How finely a sketch resolves values; sketches of different precisions never merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// 3 significant digits: for whole-run metrics.
    Run,
    /// 2 significant digits: for one-second windows of the time series.
    Window,
}

impl Precision {
    fn sigfig(self) -> u8 {
        match self {
            Precision::Run => 3,
            Precision::Window => 2,
        }
    }
}

/// Errors decoding a sketch received from a worker or read from a report.
#[derive(Debug, thiserror::Error)]
pub enum SketchError {
    #[error("sketch is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("sketch is not a valid HdrHistogram V2 encoding: {0:?}")]
    Decode(hdrhistogram::serialization::DeserializeError),
    #[error("sketches of different precision or range cannot be merged")]
    Incompatible,
}

/// A mergeable histogram of latencies in microseconds.
#[derive(Debug, Clone)]
pub struct Sketch {
    hist: Histogram<u64>,
}

impl Sketch {
    /// An empty sketch of the given precision.
    pub fn new(precision: Precision) -> Self {
        // The bounds are constants that satisfy every precondition of `new_with_bounds`
        // (low >= 1, high >= 2 * low, sigfig <= 5), so this cannot fail.
        #[allow(clippy::expect_used)]
        let hist = Histogram::new_with_bounds(1, MAX_MICROS, precision.sigfig())
            .expect("constant histogram bounds are valid");
        Sketch { hist }
    }

    /// Records one latency in microseconds; 0 is recorded as 1 and values past an hour are
    /// clamped, so recording never fails and never silently drops a sample.
    pub fn record(&mut self, micros: u64) {
        self.hist.saturating_record(micros.clamp(1, MAX_MICROS));
    }

    /// Records one latency given as a `Duration`.
    pub fn record_duration(&mut self, d: std::time::Duration) {
        self.record(u64::try_from(d.as_micros()).unwrap_or(MAX_MICROS));
    }

    /// The precision this sketch was made with (a decoded sketch has its sender's).
    pub fn precision(&self) -> Option<Precision> {
        [Precision::Run, Precision::Window]
            .into_iter()
            .find(|p| p.sigfig() == self.hist.sigfig())
    }

    /// Adds every sample of `finer`, a sketch of this precision or a finer one, into `self`,
    /// each at its bucket.
    ///
    /// Exact, not an approximation: both precisions split every power of two of the range into
    /// a power of two of equal buckets aligned on their width (2,048 for [`Precision::Run`], 256
    /// for [`Precision::Window`]), so each bucket of the finer sketch lies inside exactly one
    /// bucket of the coarser one, and counts, min, max and every percentile come out as if the
    /// samples had been recorded here.
    pub fn merge_coarsened(&mut self, finer: &Sketch) -> Result<(), SketchError> {
        match finer.hist.sigfig().cmp(&self.hist.sigfig()) {
            std::cmp::Ordering::Equal => self.merge(finer),
            std::cmp::Ordering::Less => Err(SketchError::Incompatible),
            std::cmp::Ordering::Greater => {
                for bucket in finer.hist.iter_recorded() {
                    self.hist
                        .saturating_record_n(bucket.value_iterated_to(), bucket.count_at_value());
                }
                Ok(())
            }
        }
    }

    /// Adds every sample of `other` into `self`.
    pub fn merge(&mut self, other: &Sketch) -> Result<(), SketchError> {
        if other.hist.sigfig() != self.hist.sigfig() {
            return Err(SketchError::Incompatible);
        }
        self.hist
            .add(&other.hist)
            .map_err(|_| SketchError::Incompatible)
    }

    /// Number of samples recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Value (µs) at quantile `q` in [0, 1]: the smallest bucket that `q` of the samples are at
    /// or below, reported as the bucket's highest value (never optimistic).
    pub fn quantile_micros(&self, q: f64) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.value_at_quantile(q)
        }
    }

    /// Smallest recorded value (µs), 0 when empty.
    pub fn min_micros(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.min_nz()
        }
    }

    /// Largest recorded value (µs), 0 when empty.
    pub fn max_micros(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.max()
        }
    }

    /// Clears every sample, keeping the allocation (used for per-second windows).
    pub fn reset(&mut self) {
        self.hist.reset();
    }

    /// Encodes as base64 of the compressed HdrHistogram V2 format.
    pub fn encode(&self) -> String {
        let mut buf = Vec::new();
        // Serializing into a Vec only fails on internal invariants (a counts array larger than
        // the format allows), which our fixed bounds exclude; an empty string then decodes to an
        // error at the receiver instead of aborting the worker.
        if V2DeflateSerializer::new()
            .serialize(&self.hist, &mut buf)
            .is_err()
        {
            buf.clear();
        }
        base64::engine::general_purpose::STANDARD.encode(buf)
    }

    /// Decodes what [`Sketch::encode`] produced.
    pub fn decode(text: &str) -> Result<Self, SketchError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(text)?;
        let hist: Histogram<u64> = Deserializer::new()
            .deserialize(&mut Cursor::new(bytes))
            .map_err(SketchError::Decode)?;
        Ok(Sketch { hist })
    }

    /// Space Ape's aggregator's summary of this sketch, in milliseconds.
    pub fn summary(&self) -> MetricSummary {
        let ms = |micros: u64| micros as f64 / 1000.0;
        MetricSummary {
            count: self.count(),
            min: ms(self.min_micros()),
            max: ms(self.max_micros()),
            percentile80: ms(self.quantile_micros(0.80)),
            percentile50: ms(self.quantile_micros(0.50)),
            percentile90: ms(self.quantile_micros(0.90)),
            percentile99: ms(self.quantile_micros(0.99)),
            percentile99point9: ms(self.quantile_micros(0.999)),
            percentile99point99: ms(self.quantile_micros(0.9999)),
        }
    }
}

/// One metric in the report, in the shape of Space Ape's aggregator; values in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricSummary {
    pub count: u64,
    pub min: f64,
    pub max: f64,
    pub percentile80: f64,
    pub percentile90: f64,
    pub percentile99: f64,
    pub percentile99point9: f64,
    pub percentile99point99: f64,
    /// The median; after the aggregator's keys (reports written before it was added read as 0).
    #[serde(default)]
    pub percentile50: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic xorshift generator, so failures reproduce.
    struct Rng(u64);
    impl Rng {
        fn next_f64(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Latency-like samples: a log-normal body with a Pareto tail, in microseconds.
    fn samples(n: usize, seed: u64) -> Vec<u64> {
        let mut rng = Rng(seed | 1);
        (0..n)
            .map(|_| {
                let u = rng.next_f64().max(1e-12);
                let v = rng.next_f64().max(1e-12);
                let normal = (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
                let body = (7.0 + 0.8 * normal).exp(); // median ~1.1 ms
                if rng.next_f64() < 0.02 {
                    // 2 % of requests hit a heavy tail up to seconds.
                    (body / rng.next_f64().max(1e-6).powf(0.7)) as u64
                } else {
                    body as u64
                }
            })
            .map(|x| x.clamp(1, MAX_MICROS))
            .collect()
    }

    const QUANTILES: [f64; 5] = [0.80, 0.90, 0.99, 0.999, 0.9999];

    /// Fraction of exact samples that are <= v (the empirical CDF).
    fn rank_of(sorted: &[u64], v: u64) -> f64 {
        sorted.partition_point(|&x| x <= v) as f64 / sorted.len() as f64
    }

    #[test]
    fn quantiles_within_one_percent_rank_and_value_precision() {
        let values = samples(200_000, 42);
        let mut sketch = Sketch::new(Precision::Run);
        for &v in &values {
            sketch.record(v);
        }
        let mut sorted = values.clone();
        sorted.sort_unstable();
        assert_eq!(sketch.count(), values.len() as u64);
        for q in QUANTILES {
            let est = sketch.quantile_micros(q);
            // Rank error: the estimate sits where the exact data puts quantile q, ± 1 %.
            let rank = rank_of(&sorted, est);
            assert!(
                (rank - q).abs() <= 0.01,
                "q={q}: estimate {est} has rank {rank}, more than 1% away"
            );
            // Stronger: the value itself is the exact order statistic within HDR precision.
            let idx = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            let exact = sorted[idx] as f64;
            let rel = (est as f64 - exact).abs() / exact;
            assert!(
                rel <= 0.002,
                "q={q}: estimate {est} vs exact {exact} ({rel})"
            );
        }
        assert_eq!(sketch.min_micros(), sorted[0]);
        let max_rel = (sketch.max_micros() as f64 - sorted[sorted.len() - 1] as f64).abs()
            / sorted[sorted.len() - 1] as f64;
        assert!(max_rel <= 0.001);
    }

    #[test]
    fn window_precision_is_within_one_percent() {
        let values = samples(50_000, 7);
        let mut sketch = Sketch::new(Precision::Window);
        values.iter().for_each(|&v| sketch.record(v));
        let mut sorted = values;
        sorted.sort_unstable();
        for q in QUANTILES {
            let est = sketch.quantile_micros(q);
            assert!((rank_of(&sorted, est) - q).abs() <= 0.01, "q={q}");
        }
    }

    #[test]
    fn merge_is_associative_and_equals_recording_everything_in_one() {
        // Three "workers" with different distributions and sizes.
        let parts = [samples(30_000, 1), samples(5_000, 2), samples(70_000, 3)];
        let sketches: Vec<Sketch> = parts
            .iter()
            .map(|p| {
                let mut s = Sketch::new(Precision::Run);
                p.iter().for_each(|&v| s.record(v));
                s
            })
            .collect();
        let (a, b, c) = (&sketches[0], &sketches[1], &sketches[2]);

        // (a + b) + c, through the wire encoding as workers do.
        let mut left = Sketch::decode(&a.encode()).expect("decode a");
        left.merge(&Sketch::decode(&b.encode()).expect("decode b"))
            .expect("merge");
        left.merge(c).expect("merge");
        // a + (b + c)
        let mut bc = b.clone();
        bc.merge(c).expect("merge");
        let mut right = a.clone();
        right.merge(&bc).expect("merge");
        // everything recorded into one sketch
        let mut all = Sketch::new(Precision::Run);
        parts.iter().flatten().for_each(|&v| all.record(v));

        for s in [&left, &right] {
            assert_eq!(s.count(), all.count());
            assert_eq!(s.summary(), all.summary());
            for q in [0.5, 0.8, 0.9, 0.99, 0.999, 0.9999, 1.0] {
                assert_eq!(s.quantile_micros(q), all.quantile_micros(q), "q={q}");
            }
        }
    }

    #[test]
    fn different_precisions_do_not_merge() {
        let mut run = Sketch::new(Precision::Run);
        let mut window = Sketch::new(Precision::Window);
        assert!(run.merge(&window).is_err());
        // Coarsening goes one way only: a window cannot give back run precision.
        window.record(1234);
        assert!(run.merge_coarsened(&window).is_err());
        assert_eq!(window.precision(), Some(Precision::Window));
        assert_eq!(run.precision(), Some(Precision::Run));
    }

    /// A second shipped at run precision and reduced by the coordinator is bit for bit the window
    /// the worker would have recorded: same buckets (so the same encoding), same summary. Every
    /// range of values is covered, from single microseconds (1 µs buckets in both) to an hour.
    #[test]
    fn a_run_sketch_coarsened_is_exactly_the_window_of_the_same_samples() {
        let mut values = samples(100_000, 11);
        values.extend((1..5_000).chain([MAX_MICROS, MAX_MICROS - 1, 2047, 2048, 2049, 255, 256]));
        let mut rng = Rng(99);
        values.extend((0..20_000).map(|_| (rng.next_f64() * MAX_MICROS as f64) as u64 + 1));
        for chunk in values.chunks(7_919) {
            let (mut run, mut direct) =
                (Sketch::new(Precision::Run), Sketch::new(Precision::Window));
            for &v in chunk {
                run.record(v);
                direct.record(v);
            }
            let mut coarsened = Sketch::new(Precision::Window);
            coarsened
                .merge_coarsened(&Sketch::decode(&run.encode()).expect("decode"))
                .expect("coarsen");
            assert_eq!(coarsened.summary(), direct.summary());
            assert_eq!(coarsened.encode(), direct.encode());
            for q in [0.0, 0.5, 0.95, 0.999, 1.0] {
                assert_eq!(
                    coarsened.quantile_micros(q),
                    direct.quantile_micros(q),
                    "q={q}"
                );
            }
        }
    }

    #[test]
    fn empty_sketch_summarises_to_zero_and_round_trips() {
        let s = Sketch::decode(&Sketch::new(Precision::Run).encode()).expect("decode");
        assert!(s.is_empty());
        assert_eq!(s.summary().count, 0);
        assert_eq!(s.summary().max, 0.0);
        assert!(Sketch::decode("not base64!").is_err());
    }
}
