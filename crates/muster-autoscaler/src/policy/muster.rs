//! Muster's policy: scale up early, on real demand; scale down slowly; be ready before scheduled
//! events.
//!
//! - **Signal**: requests wanted per second (served or not), read every second — not consumed
//!   capacity, which throttling caps at what is provisioned (the seed's problem 2), and not
//!   one-minute metrics minutes late (its problem 1).
//! - **Up on one breach, sized from demand and its trend**: the demand expected once new capacity
//!   is ready (now + the time capacity takes to become ready, learned from the changes made so
//!   far) is the level plus the rising trend over that lead; capacity is that over the target
//!   utilisation, asked for as soon as it exceeds what is provisioned or pending.
//! - **Down slowly**: only after demand has stayed low for a whole stabilisation window since the
//!   last increase, to the window's peak over the target, by at most a bounded step, and never
//!   below what a scheduled event needs.
//! - **Schedule**: from `event.start − lead` to `event.end`, capacity for the event's expected
//!   demand (or the demand expected when its window opens times its multiplier). The lead is the
//!   event's own or, at least, twice the learned readiness delay (a change already in flight,
//!   then this one) plus the signal's lag and a margin.

use std::collections::VecDeque;

use super::{Decision, Observation, Policy, Sample};
use crate::calendar::Calendar;

#[derive(Debug, Clone, PartialEq)]
pub struct MusterSettings {
    /// Utilisation to provision for, in (0, 1].
    pub target: f64,
    pub min: f64,
    pub max: f64,
    /// Seconds of samples the trend is fitted over.
    pub trend_window_s: u64,
    /// Seconds since the last increase before any scale-down (so that capacity turns at most
    /// once in such a window).
    pub stabilisation_s: u64,
    /// A scale-down sizes capacity for the peak demand of this many last seconds.
    pub peak_window_s: u64,
    /// Largest fraction of capacity one scale-down removes.
    pub max_step_down: f64,
    /// How long capacity takes to become ready until a change has been seen, in seconds.
    pub initial_ready_s: u64,
    /// A scale-up smaller than this fraction of current capacity waits (no chatter).
    pub up_hysteresis: f64,
    /// A scale-down smaller than this fraction waits.
    pub down_hysteresis: f64,
    /// Scheduled events.
    pub calendar: Calendar,
}

impl MusterSettings {
    pub fn new(target: f64) -> MusterSettings {
        MusterSettings {
            target,
            min: 1.0,
            max: 1_000_000.0,
            trend_window_s: 60,
            stabilisation_s: 300,
            peak_window_s: 60,
            max_step_down: 0.25,
            initial_ready_s: 60,
            up_hysteresis: 0.02,
            down_hysteresis: 0.02,
            calendar: Calendar::default(),
        }
    }
}

/// Least-squares slope of demand over `samples`, per second; 0 with too few of them.
fn slope(samples: &[Sample]) -> f64 {
    let n = samples.len() as f64;
    if n < 10.0 {
        return 0.0;
    }
    let mean_t = samples.iter().map(|s| s.at_s as f64).sum::<f64>() / n;
    let mean_d = samples.iter().map(|s| s.requested).sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for s in samples {
        let dt = s.at_s as f64 - mean_t;
        num += dt * (s.requested - mean_d);
        den += dt * dt;
    }
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}

pub struct Muster {
    settings: MusterSettings,
    samples: VecDeque<Sample>,
    /// The longest time a change has taken to become ready so far.
    ready_s: u64,
    /// When the pending change was asked for, and its size.
    asked: Option<(u64, f64)>,
    last_increase_s: Option<u64>,
}

/// Seconds added to the lead on top of the readiness delay and the signal's lag.
const LEAD_MARGIN_S: u64 = 5;

impl Muster {
    pub fn new(settings: MusterSettings) -> Muster {
        let ready_s = settings.initial_ready_s;
        Muster {
            settings,
            samples: VecDeque::new(),
            ready_s,
            asked: None,
            last_increase_s: None,
        }
    }

    /// The scheduled events, to read or add to.
    pub fn calendar_mut(&mut self) -> &mut Calendar {
        &mut self.settings.calendar
    }

    /// Demand now: the latest sample when it is above the mean of the last few seconds (a jump
    /// is acted on at once: scale up early), else that mean (one low second does not count).
    fn level(&self) -> f64 {
        let recent: Vec<f64> = self
            .samples
            .iter()
            .rev()
            .take(5)
            .map(|s| s.requested)
            .collect();
        let mean = recent.iter().sum::<f64>() / recent.len().max(1) as f64;
        recent.first().copied().unwrap_or(0.0).max(mean)
    }

    /// `capacity` within min and max (the max wins if they cross; `clamp` would panic).
    fn bounded(&self, capacity: f64) -> f64 {
        capacity.max(self.settings.min).min(self.settings.max)
    }

    /// The peak demand of the last `peak_window_s` seconds.
    fn window_peak(&self, now_s: u64) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.at_s + self.settings.peak_window_s >= now_s)
            .map(|s| s.requested)
            .fold(0.0, f64::max)
    }
}

impl Policy for Muster {
    fn name(&self) -> String {
        "muster".into()
    }

    fn decide(&mut self, observation: &Observation) -> Decision {
        let now = observation.now_s;
        // Learn how long capacity takes to become ready.
        if let Some((asked_at, size)) = self.asked {
            if observation.pending.is_none() && (observation.provisioned - size).abs() < 1e-6 {
                self.ready_s = self.ready_s.max(now.saturating_sub(asked_at));
                self.asked = None;
            }
        }
        let Some(sample) = observation.demand else {
            return Decision::hold("no demand sample yet");
        };
        if self
            .samples
            .back()
            .is_none_or(|last| last.at_s < sample.at_s)
        {
            self.samples.push_back(sample);
        }
        let keep = self
            .settings
            .trend_window_s
            .max(self.settings.peak_window_s);
        while self
            .samples
            .front()
            .is_some_and(|s| s.at_s + keep < sample.at_s)
        {
            self.samples.pop_front();
        }
        let target = self.settings.target;
        let lag = now.saturating_sub(sample.at_s);
        let lead = self.ready_s + lag + LEAD_MARGIN_S;
        let level = self.level();
        // The trend over the trend window only.
        let in_window = (self.settings.trend_window_s as usize).min(self.samples.len());
        let recent: Vec<Sample> = self
            .samples
            .iter()
            .skip(self.samples.len() - in_window)
            .copied()
            .collect();
        let slope = slope(&recent);
        let forecast = level + slope.max(0.0) * lead as f64;
        // An event must be ready in time even if it opens while another change is in flight:
        // that one's readiness, then its own.
        let event_lead = 2 * self.ready_s + lag + LEAD_MARGIN_S;
        let scheduled = self.settings.calendar.need(now, event_lead, forecast);
        let current = observation.pending.unwrap_or(observation.provisioned);
        let wanted = self.bounded(forecast.max(scheduled.demand) / target);
        if wanted > current * (1.0 + self.settings.up_hysteresis) {
            if observation.pending.is_some() {
                return Decision::hold(format!(
                    "want {wanted:.1}; a change to {current:.1} is in progress"
                ));
            }
            self.asked = Some((now, wanted));
            self.last_increase_s = Some(now);
            let rule = if scheduled.demand > forecast {
                "schedule"
            } else {
                "scale_up"
            };
            return Decision {
                desired: Some(wanted),
                rule,
                why: format!(
                    "demand {level:.1}/s rising {:.2}/s² over a {lead} s lead → {forecast:.1}/s{}; / {target:.2} = {wanted:.1} > {current:.1}",
                    slope.max(0.0),
                    scheduled
                        .event
                        .map(|name| format!(", event {name:?} needs {:.1}/s", scheduled.demand))
                        .unwrap_or_default()
                ),
            };
        }
        let calm_for = self
            .last_increase_s
            .map_or(u64::MAX, |at| now.saturating_sub(at));
        if observation.pending.is_none() && calm_for >= self.settings.stabilisation_s {
            let peak = self.window_peak(sample.at_s).max(scheduled.demand);
            let floor = current * (1.0 - self.settings.max_step_down);
            let lower = self.bounded((peak / target).max(floor));
            if lower < current * (1.0 - self.settings.down_hysteresis) {
                self.asked = Some((now, lower));
                return Decision {
                    desired: Some(lower),
                    rule: "scale_down",
                    why: format!(
                        "peak {peak:.1}/s over the last {} s / {target:.2} = {:.1}; at most {:.0} % down: {lower:.1} < {current:.1}",
                        self.settings.peak_window_s,
                        peak / target,
                        self.settings.max_step_down * 100.0
                    ),
                };
            }
        }
        Decision::hold(format!(
            "demand {level:.1}/s, forecast {forecast:.1}/s, capacity {current:.1}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Alarm, AlarmKind, MinuteMetric};

    fn seen(now_s: u64, provisioned: f64, requested: f64) -> Observation {
        Observation {
            now_s,
            provisioned,
            pending: None,
            demand: Some(Sample {
                at_s: now_s,
                requested,
            }),
            minute: None,
        }
    }

    #[test]
    fn one_breach_scales_up_sized_from_demand() {
        let mut policy = Muster::new(MusterSettings::new(0.8));
        let decision = policy.decide(&seen(0, 100.0, 100.0));
        assert_eq!(decision.rule, "scale_up");
        assert_eq!(decision.desired, Some(125.0), "{}", decision.why);
        assert!(decision.why.contains("100.0/s"), "{}", decision.why);
    }

    #[test]
    fn scale_down_waits_for_the_stabilisation_window_and_is_bounded() {
        let mut settings = MusterSettings::new(0.5);
        settings.stabilisation_s = 300;
        let mut policy = Muster::new(settings);
        assert_eq!(policy.decide(&seen(0, 10.0, 100.0)).desired, Some(200.0));
        // Demand falls away at once; capacity 200 is in force from second 60; the increase was
        // at 0, so the first scale-down may come at 300.
        for now in 60..300 {
            let decision = policy.decide(&seen(now, 200.0, 10.0));
            assert_eq!(decision.desired, None, "at {now}: {}", decision.why);
        }
        let decision = policy.decide(&seen(300, 200.0, 10.0));
        assert_eq!(decision.rule, "scale_down");
        assert_eq!(
            decision.desired,
            Some(150.0),
            "at most 25 % down: {}",
            decision.why
        );
    }

    #[test]
    fn bounds_hold() {
        let mut settings = MusterSettings::new(0.5);
        settings.max = 120.0;
        settings.min = 40.0;
        let mut policy = Muster::new(settings);
        assert_eq!(policy.decide(&seen(0, 50.0, 1000.0)).desired, Some(120.0));
        let mut settings = MusterSettings::new(0.5);
        settings.min = 40.0;
        let mut policy = Muster::new(settings);
        assert_eq!(policy.decide(&seen(0, 100.0, 1.0)).desired, Some(75.0));
        assert_eq!(
            policy.decide(&seen(1, 40.0, 1.0)).desired,
            None,
            "not below min"
        );
    }

    #[test]
    fn a_scheduled_event_opens_twice_the_readiness_delay_early() {
        let mut settings = MusterSettings::new(0.5);
        settings.calendar = Calendar::from_toml(
            "[[event]]\nname = \"launch\"\nstart_s = 1000\nend_s = 2000\nexpected_demand = 300\n",
        )
        .expect("valid");
        let mut policy = Muster::new(settings);
        // Ready delay 60 s (initial), lag 0, margin 5: opens at 1000 − 125 = 875.
        assert_eq!(policy.decide(&seen(874, 20.0, 10.0)).desired, None);
        let decision = policy.decide(&seen(875, 20.0, 10.0));
        assert_eq!(decision.rule, "schedule");
        assert_eq!(decision.desired, Some(600.0), "{}", decision.why);
        assert!(decision.why.contains("launch"));
    }

    #[test]
    fn vanilla_waits_for_five_breaches_hypotheses_for_one() {
        let minute = |m: u64| Observation {
            now_s: m * 60 + 60,
            provisioned: 100.0,
            pending: None,
            demand: None,
            minute: Some(MinuteMetric {
                minute: m,
                consumed: 95.0,
                requested: 200.0,
                provisioned: 100.0,
            }),
        };
        let mut vanilla = Alarm::new(AlarmKind::Vanilla, 0.8, 1.0, 1e6);
        for m in 0..4 {
            assert_eq!(vanilla.decide(&minute(m)).desired, None);
        }
        assert_eq!(vanilla.decide(&minute(4)).desired, Some(95.0 / 0.8));
        let mut h1 = Alarm::new(AlarmKind::OneBreach, 0.8, 1.0, 1e6);
        assert_eq!(h1.decide(&minute(0)).desired, Some(95.0 / 0.8));
        let mut h2 = Alarm::new(AlarmKind::OneBreachOnRequests, 0.8, 1.0, 1e6);
        assert_eq!(
            h2.decide(&minute(0)).desired,
            Some(250.0),
            "sized from requests"
        );
    }
}
