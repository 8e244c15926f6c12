//! Arrival schedules: when each simulated player starts.
//!
//! A scenario is a list of phases. Each phase lasts `duration` seconds and brings `players` new
//! players, whose arrival *rate* over the phase follows a [`Shape`]. The schedule is
//! deterministic: player `k` of a phase with `n` arrivals starts when the shape's cumulative curve
//! reaches `(k + 0.5) / n`, so the arrival curve is the intended one to within half a player, on
//! every run, and every worker can compute any player's start time without talking to the others.
//! Worker `w` of `W` runs the players whose global index `i` has `i % W == w`, which gives every
//! worker the same shape at `1/W` of the rate.

use serde::{Deserialize, Serialize};

/// The arrival-rate profile of a phase, on normalised time `u` in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// Constant arrival rate: the player count climbs in a straight line.
    Linear,
    /// The bell curve of Space Ape's DynamoDB autoscaling study: the rate builds slowly to a
    /// peak late in the phase (at `peak`, default 0.7), then drops off faster.
    Bell,
    /// That study's top-heavy curve: the rate climbs sharply to an early peak (default 0.1), then
    /// declines slowly.
    Spike,
}

impl Shape {
    /// The default position of the rate peak, as a fraction of the phase.
    pub fn default_peak(self) -> f64 {
        match self {
            Shape::Linear => 0.5,
            Shape::Bell => 0.7,
            Shape::Spike => 0.1,
        }
    }
}

/// A shape with its peak position resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Curve {
    pub shape: Shape,
    /// Where the arrival rate peaks, as a fraction of the phase, strictly within (0, 1).
    pub peak: f64,
}

impl Curve {
    /// The normalised arrival rate at `u` (integrates to 1 over [0, 1]).
    ///
    /// Bell and spike are two raised-cosine halves joined at the peak: 0 → 2 over [0, peak] and
    /// 2 → 0 over [peak, 1]. Each half integrates to its width, so the whole integrates to 1.
    pub fn density(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0);
        match self.shape {
            Shape::Linear => 1.0,
            Shape::Bell | Shape::Spike => {
                let p = self.peak;
                if u <= p {
                    1.0 - (std::f64::consts::PI * u / p).cos()
                } else {
                    1.0 + (std::f64::consts::PI * (u - p) / (1.0 - p)).cos()
                }
            }
        }
    }

    /// The fraction of the phase's arrivals that have happened by normalised time `u`.
    pub fn cumulative(&self, u: f64) -> f64 {
        use std::f64::consts::PI;
        let u = u.clamp(0.0, 1.0);
        match self.shape {
            Shape::Linear => u,
            Shape::Bell | Shape::Spike => {
                let p = self.peak;
                if u <= p {
                    u - p / PI * (PI * u / p).sin()
                } else {
                    let q = 1.0 - p;
                    u + q / PI * (PI * (u - p) / q).sin()
                }
            }
        }
    }

    /// The normalised time at which the cumulative curve reaches `f` (inverse of
    /// [`Curve::cumulative`], which is continuous and non-decreasing).
    pub fn inverse(&self, f: f64) -> f64 {
        let f = f.clamp(0.0, 1.0);
        if self.shape == Shape::Linear {
            return f;
        }
        let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
        // 52 halvings reach f64 resolution on [0, 1].
        for _ in 0..52 {
            let mid = 0.5 * (lo + hi);
            if self.cumulative(mid) < f {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    }
}

/// One phase of the schedule, already validated.
#[derive(Debug, Clone, PartialEq)]
pub struct PhasePlan {
    pub name: String,
    /// Seconds from the run start at which the phase begins.
    pub start_s: f64,
    pub duration_s: f64,
    /// New players arriving during the phase (0 for a hold).
    pub players: u64,
    pub curve: Curve,
}

/// The whole run's arrivals: phases back to back.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub phases: Vec<PhasePlan>,
}

impl Schedule {
    /// Total players over all phases.
    pub fn total_players(&self) -> u64 {
        self.phases.iter().map(|p| p.players).sum()
    }

    /// Seconds from the run start to the end of the last phase.
    pub fn duration_s(&self) -> f64 {
        self.phases.iter().map(|p| p.duration_s).sum()
    }

    /// Start offset (seconds from the run start) of the player with global index `i`, or `None`
    /// past the last player. Indices are in arrival order.
    pub fn arrival_s(&self, mut i: u64) -> Option<f64> {
        for phase in &self.phases {
            if i < phase.players {
                let f = (i as f64 + 0.5) / phase.players as f64;
                return Some(phase.start_s + phase.curve.inverse(f) * phase.duration_s);
            }
            i -= phase.players;
        }
        None
    }

    /// The global indices and start offsets of the players that worker `index` of `count`
    /// runs, in arrival order.
    pub fn worker_arrivals(&self, index: u64, count: u64) -> impl Iterator<Item = (u64, f64)> + '_ {
        let count = count.max(1);
        (index..self.total_players())
            .step_by(count as usize)
            .filter_map(move |i| self.arrival_s(i).map(|t| (i, t)))
    }

    /// How many players worker `index` of `count` runs.
    pub fn worker_players(&self, index: u64, count: u64) -> u64 {
        let total = self.total_players();
        let count = count.max(1);
        if index >= total {
            0
        } else {
            (total - index).div_ceil(count)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_phase(shape: Shape, peak: Option<f64>, players: u64, duration_s: f64) -> Schedule {
        Schedule {
            phases: vec![PhasePlan {
                name: "ramp".into(),
                start_s: 0.0,
                duration_s,
                players,
                curve: Curve {
                    shape,
                    peak: peak.unwrap_or(shape.default_peak()),
                },
            }],
        }
    }

    /// Arrivals per 1-second bin versus what the intended rate curve integrates to in that bin.
    fn check_bins(schedule: &Schedule, intended: impl Fn(f64, f64) -> f64) {
        let duration = schedule.duration_s();
        let bins = duration.ceil() as usize;
        let mut counts = vec![0u64; bins];
        for i in 0..schedule.total_players() {
            let t = schedule.arrival_s(i).expect("index within total");
            assert!(
                (0.0..=duration).contains(&t),
                "arrival {t} outside the phase"
            );
            counts[(t.floor() as usize).min(bins - 1)] += 1;
        }
        for (b, &got) in counts.iter().enumerate() {
            let want = intended(b as f64, (b + 1) as f64);
            // Deterministic quantile spacing puts each bin within one player of the integral.
            assert!(
                (got as f64 - want).abs() <= 1.0,
                "bin {b}: {got} arrivals, intended {want:.2}"
            );
        }
        assert_eq!(counts.iter().sum::<u64>(), schedule.total_players());
    }

    #[test]
    fn densities_integrate_to_one_and_cumulatives_match() {
        for shape in [Shape::Linear, Shape::Bell, Shape::Spike] {
            let c = Curve {
                shape,
                peak: shape.default_peak(),
            };
            let n = 100_000;
            let mut integral = 0.0;
            for k in 0..n {
                let u = (k as f64 + 0.5) / n as f64;
                integral += c.density(u) / n as f64;
                if k % 1000 == 0 {
                    assert!((integral - c.cumulative((k + 1) as f64 / n as f64)).abs() < 1e-4);
                }
            }
            assert!(
                (integral - 1.0).abs() < 1e-6,
                "{shape:?} integrates to {integral}"
            );
            assert!((c.cumulative(1.0) - 1.0).abs() < 1e-12);
            assert_eq!(c.cumulative(0.0), 0.0);
        }
    }

    #[test]
    fn linear_ramp_has_constant_arrival_rate() {
        let s = one_phase(Shape::Linear, None, 6_000, 60.0);
        check_bins(&s, |a, b| 6_000.0 * (b - a) / 60.0);
    }

    #[test]
    fn bell_ramp_builds_slowly_then_drops_faster() {
        let s = one_phase(Shape::Bell, None, 10_000, 100.0);
        let c = s.phases[0].curve;
        check_bins(&s, |a, b| {
            10_000.0 * (c.cumulative(b / 100.0) - c.cumulative(a / 100.0))
        });
        // The rate peaks at 70 % of the phase: the busiest second is there.
        let per_second: Vec<f64> = (0..100)
            .map(|b| c.cumulative((b + 1) as f64 / 100.0) - c.cumulative(b as f64 / 100.0))
            .collect();
        let busiest = per_second
            .iter()
            .enumerate()
            .max_by(|x, y| x.1.total_cmp(y.1))
            .map(|(i, _)| i)
            .unwrap_or(0);
        assert!((69..=70).contains(&busiest), "peak at {busiest}");
        // Slow build: by the peak (70 % of the time) 70 % have arrived, but only 13 % by mid-build.
        assert!((c.cumulative(0.7) - 0.7).abs() < 1e-9);
        assert!(c.cumulative(0.35) < 0.2);
    }

    #[test]
    fn spike_climbs_sharply_then_declines_slowly() {
        let s = one_phase(Shape::Spike, None, 10_000, 100.0);
        let c = s.phases[0].curve;
        check_bins(&s, |a, b| {
            10_000.0 * (c.cumulative(b / 100.0) - c.cumulative(a / 100.0))
        });
        // The peak rate (2x the mean) is reached 10 % in, and the decline takes the other 90 %.
        assert!((c.density(0.1) - 2.0).abs() < 1e-9);
        assert!(c.density(0.05) > 0.9 && c.density(0.55) > 0.9);
        assert!(c.density(0.99) < 0.01);
    }

    #[test]
    fn phases_follow_each_other_and_workers_split_evenly() {
        let s = Schedule {
            phases: vec![
                PhasePlan {
                    name: "ramp".into(),
                    start_s: 0.0,
                    duration_s: 10.0,
                    players: 100,
                    curve: Curve {
                        shape: Shape::Linear,
                        peak: 0.5,
                    },
                },
                PhasePlan {
                    name: "hold".into(),
                    start_s: 10.0,
                    duration_s: 5.0,
                    players: 0,
                    curve: Curve {
                        shape: Shape::Linear,
                        peak: 0.5,
                    },
                },
                PhasePlan {
                    name: "late".into(),
                    start_s: 15.0,
                    duration_s: 5.0,
                    players: 11,
                    curve: Curve {
                        shape: Shape::Linear,
                        peak: 0.5,
                    },
                },
            ],
        };
        assert_eq!(s.total_players(), 111);
        assert_eq!(s.duration_s(), 20.0);
        assert!(s.arrival_s(99).expect("exists") < 10.0);
        assert!(s.arrival_s(100).expect("exists") >= 15.0);
        assert_eq!(s.arrival_s(111), None);
        let mut seen: Vec<u64> = Vec::new();
        for w in 0..3 {
            let mine: Vec<(u64, f64)> = s.worker_arrivals(w, 3).collect();
            assert_eq!(mine.len() as u64, s.worker_players(w, 3));
            assert!(
                mine.windows(2).all(|p| p[0].1 <= p[1].1),
                "in arrival order"
            );
            seen.extend(mine.iter().map(|(i, _)| i));
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..111).collect::<Vec<_>>());
    }
}
