//! A provisioned-capacity model with DynamoDB's behaviour, to compare policies on a trace.
//!
//! Per second: a change of capacity asked for becomes effective `apply_delay_s` later — on
//! [`Platform::DynamoDb`] one change at a time, as a table being updated refuses another update;
//! on [`Platform::Kubernetes`] the desired count may be set again any second, as
//! `muster autoscale run` does through KEDA (see [`Platform`]); demand is served up to the
//! provisioned capacity plus the burst credit — unused capacity saved for up to
//! `burst_window_s` seconds, as DynamoDB does — and the rest is throttled. Metrics: one-minute
//! averages of consumed and requested, published `metric_lag_s` after the minute closes
//! (CloudWatch), and per-second demand samples seen `signal_lag_s` late (a server's own
//! counters). Deterministic: the same trace and policy give the same run.

pub mod report;
mod trace;

pub use trace::Trace;

use crate::policy::{Decision, MinuteMetric, Observation, Policy, Sample};

#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub initial_capacity: f64,
    pub apply_delay_s: u64,
    pub metric_lag_s: u64,
    pub signal_lag_s: u64,
    pub burst_window_s: f64,
}

impl Default for Model {
    /// Space Ape's setting: a table starting at 50 write units; capacity effective a minute after
    /// it is asked for; CloudWatch three minutes late ("typically a few minutes behind"); a
    /// server's own counters 5 s late; no burst credit. DynamoDB keeps up to 300 s of unused
    /// capacity as burst only on a best-effort basis (it may spend it on maintenance without
    /// notice); assuming none is the cautious case, and the one whose results match Space Ape's
    /// (with 300 s of burst, vanilla survives the bell curve at 70 %). `burst_window_s = 300`
    /// models it.
    fn default() -> Self {
        Model {
            initial_capacity: 50.0,
            apply_delay_s: 60,
            metric_lag_s: 180,
            signal_lag_s: 5,
            burst_window_s: 0.0,
        }
    }
}

/// How capacity changes are made, and what the policy is told about them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// DynamoDB, as in Space Ape's experiment: one change at a time; the policy sees the capacity
    /// in force and the change pending until it applies (and so decides once per change).
    DynamoDb,
    /// Kubernetes as `muster autoscale run` drives it: the policy is asked every second and may
    /// set the desired count again at any time; it sees the count it last asked for as its
    /// capacity, with nothing pending (the live loop cannot see pods start). Each ask is in
    /// force `apply_delay_s` after it was made. A policy that reads a jump as a trend raises its
    /// ask second after second here — the live overshoot the DynamoDB model hides.
    Kubernetes,
}

impl Platform {
    pub fn name(self) -> &'static str {
        match self {
            Platform::DynamoDb => "dynamodb",
            Platform::Kubernetes => "kubernetes",
        }
    }
}

/// One capacity change a policy made.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub asked_s: u64,
    pub effective_s: u64,
    pub from: f64,
    pub to: f64,
    pub rule: &'static str,
    pub why: String,
}

/// One minute of a run, for charts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Minute {
    pub provisioned: f64,
    pub requested: f64,
    pub consumed: f64,
    pub throttled: f64,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub policy: String,
    pub trace: &'static str,
    pub platform: Platform,
    pub requested: f64,
    pub consumed: f64,
    pub throttled: f64,
    /// Mean over seconds of unused capacity as a share of provisioned capacity.
    pub mean_headroom: f64,
    pub changes: Vec<Change>,
    pub minutes: Vec<Minute>,
    /// Capacity in force each second.
    pub provisioned: Vec<f64>,
    /// The highest demand of any second.
    pub peak_demand: f64,
}

impl Run {
    /// Share of requests served, 0 to 1.
    pub fn success(&self) -> f64 {
        if self.requested == 0.0 {
            1.0
        } else {
            self.consumed / self.requested
        }
    }

    /// Peak over-provisioning: the most capacity in force at any second over what the run's
    /// highest demand needs at `target` (1.0: never more than the peak needs; 5.0: five times
    /// it). A forecast that overshoots shows here; slow scale-down does not (it keeps at most
    /// what the peak needed).
    pub fn peak_over_provisioning(&self, target: f64) -> f64 {
        let peak_capacity = self.provisioned.iter().copied().fold(0.0, f64::max);
        if self.peak_demand <= 0.0 {
            return 1.0;
        }
        peak_capacity / (self.peak_demand / target)
    }

    /// The most changes of direction (up after down, or down after up) within any 10 minutes.
    pub fn max_direction_changes_per_10_min(&self) -> usize {
        let turns: Vec<u64> = self
            .changes
            .windows(2)
            .filter(|w| (w[0].to > w[0].from) != (w[1].to > w[1].from))
            .map(|w| w[1].asked_s)
            .collect();
        turns
            .iter()
            .map(|&start| {
                turns
                    .iter()
                    .filter(|&&t| t >= start && t < start + 600)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }
}

/// Runs `policy` on `trace` under `model`, on DynamoDB (Space Ape's setting).
pub fn run(trace: &Trace, model: &Model, policy: &mut dyn Policy) -> Run {
    run_on(Platform::DynamoDb, trace, model, policy)
}

/// Runs `policy` on `trace` under `model` on `platform`.
pub fn run_on(platform: Platform, trace: &Trace, model: &Model, policy: &mut dyn Policy) -> Run {
    let mut provisioned = model.initial_capacity;
    let mut burst = 0.0_f64;
    // DynamoDB: the one change in flight (effective at, to).
    let mut pending: Option<(u64, f64)> = None;
    // Kubernetes: every ask not yet in force (effective at, to), oldest first, and the last ask.
    let mut starting: std::collections::VecDeque<(u64, f64)> = std::collections::VecDeque::new();
    let mut asked = model.initial_capacity;
    let mut published: Vec<(u64, MinuteMetric)> = Vec::new();
    let mut minute_sum = Minute::default();
    let mut out = Run {
        policy: policy.name(),
        trace: trace.name,
        platform,
        requested: 0.0,
        consumed: 0.0,
        throttled: 0.0,
        mean_headroom: 0.0,
        changes: Vec::new(),
        minutes: Vec::new(),
        provisioned: Vec::with_capacity(trace.demand.len()),
        peak_demand: trace.peak(),
    };
    let mut headroom_sum = 0.0;
    for (second, &demand) in trace.demand.iter().enumerate() {
        let now = second as u64;
        if let Some((effective, to)) = pending {
            if now >= effective {
                provisioned = to;
                burst = burst.min(model.burst_window_s * provisioned);
                pending = None;
            }
        }
        while let Some(&(effective, to)) = starting.front() {
            if now < effective {
                break;
            }
            provisioned = to;
            burst = burst.min(model.burst_window_s * provisioned);
            starting.pop_front();
        }
        let consumed = demand.min(provisioned + burst);
        if demand <= provisioned {
            burst = (burst + provisioned - demand).min(model.burst_window_s * provisioned);
        } else {
            burst -= consumed - provisioned;
        }
        out.requested += demand;
        out.consumed += consumed;
        out.throttled += demand - consumed;
        headroom_sum += ((provisioned - demand) / provisioned).max(0.0);
        out.provisioned.push(provisioned);
        minute_sum.provisioned += provisioned;
        minute_sum.requested += demand;
        minute_sum.consumed += consumed;
        minute_sum.throttled += demand - consumed;
        if second % 60 == 59 {
            let minute = now / 60;
            let per_second = Minute {
                provisioned: minute_sum.provisioned / 60.0,
                requested: minute_sum.requested / 60.0,
                consumed: minute_sum.consumed / 60.0,
                throttled: minute_sum.throttled / 60.0,
            };
            published.push((
                now + 1 + model.metric_lag_s,
                MinuteMetric {
                    minute,
                    consumed: per_second.consumed,
                    requested: per_second.requested,
                    provisioned: per_second.provisioned,
                },
            ));
            out.minutes.push(per_second);
            minute_sum = Minute::default();
        }
        let seen = now.checked_sub(model.signal_lag_s).map(|at| Sample {
            at_s: at,
            requested: trace.demand[at as usize],
        });
        let (seen_capacity, seen_pending) = match platform {
            Platform::DynamoDb => (provisioned, pending.map(|(_, to)| to)),
            Platform::Kubernetes => (asked, None),
        };
        let observation = Observation {
            now_s: now,
            provisioned: seen_capacity,
            pending: seen_pending,
            demand: seen,
            minute: published
                .iter()
                .rev()
                .find(|(visible, _)| *visible <= now)
                .map(|(_, m)| *m),
        };
        let Decision { desired, rule, why } = policy.decide(&observation);
        if let Some(to) = desired {
            let (current, free) = match platform {
                Platform::DynamoDb => {
                    (pending.map_or(provisioned, |(_, to)| to), pending.is_none())
                }
                Platform::Kubernetes => (asked, true),
            };
            if free && (to - current).abs() >= 0.5 {
                match platform {
                    Platform::DynamoDb => pending = Some((now + model.apply_delay_s, to)),
                    Platform::Kubernetes => starting.push_back((now + model.apply_delay_s, to)),
                }
                asked = to;
                out.changes.push(Change {
                    asked_s: now,
                    effective_s: now + model.apply_delay_s,
                    from: current,
                    to,
                    rule,
                    why,
                });
            }
        }
    }
    out.mean_headroom = headroom_sum / trace.demand.len().max(1) as f64;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Alarm, AlarmKind, Muster, MusterSettings};

    #[test]
    fn burst_credit_absorbs_a_short_spike_then_throttles() {
        struct Fixed;
        impl Policy for Fixed {
            fn name(&self) -> String {
                "fixed".into()
            }
            fn decide(&mut self, _: &Observation) -> Decision {
                Decision::hold("fixed")
            }
        }
        let mut demand = vec![25.0; 60];
        demand.extend(vec![100.0; 60]);
        let trace = Trace {
            name: "spike",
            demand,
        };
        let model = Model {
            burst_window_s: 300.0,
            ..Model::default()
        };
        let run = run(&trace, &model, &mut Fixed);
        // 60 s at 25 of 50 saves 1,500 units; the spike needs 50 a second over capacity.
        assert!(
            (run.throttled - (60.0 * 50.0 - 1500.0)).abs() < 1e-6,
            "{}",
            run.throttled
        );
        let without = super::run(&trace, &Model::default(), &mut Fixed);
        assert!(
            (without.throttled - 60.0 * 50.0).abs() < 1e-6,
            "no burst: every excess throttled"
        );
    }

    #[test]
    fn the_same_inputs_give_the_same_run() {
        let trace = Trace::top_heavy();
        let a = run(
            &trace,
            &Model::default(),
            &mut Muster::new(MusterSettings::new(0.8)),
        );
        let b = run(
            &trace,
            &Model::default(),
            &mut Muster::new(MusterSettings::new(0.8)),
        );
        assert_eq!(a, b);
        let v = run(
            &trace,
            &Model::default(),
            &mut Alarm::new(AlarmKind::Vanilla, 0.8, 1.0, 1e6),
        );
        assert_ne!(a.success(), v.success());
    }
}
