//! Muster's policy: scale up early, on real demand; scale down slowly; be ready before scheduled
//! events.
//!
//! - **Signal**: demand as it is wanted (requests per second served or not, or sockets open),
//!   read every second — not consumed capacity, which throttling caps at what is provisioned (the
//!   seed's problem 2), and not one-minute metrics minutes late (its problem 1).
//! - **Up on one breach, sized from demand and its trend**: the demand expected once new capacity
//!   is ready (now + the time capacity takes to become ready, learned from the changes made so
//!   far) is the level plus the rising trend over that lead; capacity is that over the target
//!   utilisation, asked for as soon as it exceeds what is provisioned or pending. Only a steady
//!   rise is a trend (every quarter of the last minute above the one before): a jump is a new
//!   level and is sized as one, however steep the line through it. The projection never exceeds
//!   `max_forecast_ratio` times the level.
//! - **Down slowly**: only after demand has stayed low for a whole stabilisation window since the
//!   last increase and never while a steady rise is projected, to the window's peak over the
//!   target, by at most a bounded step, one step per readiness delay, and never below what a
//!   scheduled event needs.
//! - **Schedule**: from `event.start − lead` to `event.end`, capacity for the event's expected
//!   demand (or the demand expected when its window opens times its multiplier). The lead is the
//!   event's own or, at least, twice the learned readiness delay (a change already in flight,
//!   then this one) plus the signal's lag and a margin.

use std::collections::VecDeque;

use super::{Decision, Observation, Policy, Sample};
use crate::calendar::Calendar;

/// What the demand signal measures, so that decisions print it in its own units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A rate (requests, writes): the level prints as `212.0/s`, its trend as `0.92/s²`.
    PerSecond,
    /// A gauge, a count of things present (`"sockets"`, `"tickets"`, `"rooms"`): the level prints
    /// as `300.0 sockets`, its trend as `2.00 sockets/s`.
    Count(&'static str),
}

impl Unit {
    fn level(self, value: f64) -> String {
        match self {
            Unit::PerSecond => format!("{value:.1}/s"),
            Unit::Count(what) => format!("{value:.1} {what}"),
        }
    }

    fn trend(self, value: f64) -> String {
        match self {
            Unit::PerSecond => format!("{value:.2}/s²"),
            Unit::Count(what) => format!("{value:.2} {what}/s"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct MusterSettings {
    /// Utilisation to provision for, in (0, 1].
    pub target: f64,
    pub min: f64,
    pub max: f64,
    /// Project a rising trend over the lead (`false`: size from the level only — the comparison
    /// the simulator runs beside it).
    pub trend: bool,
    /// Seconds of readings the trend is fitted over, and in which its rise must be steady.
    pub trend_window_s: u64,
    /// The demand projected at the end of the lead is at most this many times the level now
    /// (a bound on what any fitted slope may add, however steep).
    pub max_forecast_ratio: f64,
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
    /// What demand measures, for the decisions' text.
    pub unit: Unit,
    /// Scheduled events.
    pub calendar: Calendar,
}

impl MusterSettings {
    pub fn new(target: f64) -> MusterSettings {
        MusterSettings {
            target,
            min: 1.0,
            max: 1_000_000.0,
            trend: true,
            trend_window_s: 60,
            max_forecast_ratio: 2.0,
            stabilisation_s: 300,
            peak_window_s: 60,
            max_step_down: 0.25,
            initial_ready_s: 60,
            up_hysteresis: 0.02,
            down_hysteresis: 0.02,
            unit: Unit::PerSecond,
            calendar: Calendar::default(),
        }
    }

    /// The same, sizing from the level only (no trend).
    pub fn level_only(target: f64) -> MusterSettings {
        MusterSettings {
            trend: false,
            ..MusterSettings::new(target)
        }
    }
}

/// How many equal parts of the trend window must each average more than the one before for a
/// rise to count as a trend.
const TREND_PARTS: usize = 4;

/// The trend of demand over a window of readings, and whether it may be projected.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Trend {
    /// Per second (may be negative): the least-squares slope over the window, and when the rise
    /// is steady, no more than the slowest part's rise.
    slope: f64,
    /// The rise was steady: every part of the window averaged above the one before.
    steady: bool,
}

/// The trend of `samples`, the readings of one window (oldest first, `window_s` long).
///
/// Steady means each of [`TREND_PARTS`] equal parts of the window averaged more than the one
/// before. A jump (flat, then flat higher) fails that whatever its fitted slope: the parts before
/// it are level with each other, and so are the parts after it. A steady rise's slope is the
/// least-squares one, but no faster than the slowest part's rise — so a jump that lands after
/// parts rising by chance (noise) adds only what the noise rose, not the jump. Too few readings
/// (under half the window) give none.
fn trend(samples: &[Sample], window_s: u64) -> Option<Trend> {
    let (first, last) = (samples.first()?, samples.last()?);
    if window_s < TREND_PARTS as u64 || (samples.len() as u64) * 2 < window_s {
        return None;
    }
    let n = samples.len() as f64;
    let mean_t = samples.iter().map(|s| s.at_s as f64).sum::<f64>() / n;
    let mean_d = samples.iter().map(|s| s.requested).sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for s in samples {
        let dt = s.at_s as f64 - mean_t;
        num += dt * (s.requested - mean_d);
        den += dt * dt;
    }
    let fitted = if den == 0.0 { 0.0 } else { num / den };
    // The window's parts by time, ending at the newest reading.
    let start = last.at_s.saturating_sub(window_s - 1).max(first.at_s);
    let span = last.at_s - start + 1;
    let mut sums = [(0.0_f64, 0_u32); TREND_PARTS];
    for s in samples.iter().filter(|s| s.at_s >= start) {
        let part = ((s.at_s - start) * TREND_PARTS as u64 / span) as usize;
        let (sum, count) = &mut sums[part.min(TREND_PARTS - 1)];
        *sum += s.requested;
        *count += 1;
    }
    let means: Vec<Option<f64>> = sums
        .iter()
        .map(|&(sum, count)| (count > 0).then(|| sum / count as f64))
        .collect();
    let steady = means
        .windows(2)
        .all(|pair| matches!((pair[0], pair[1]), (Some(a), Some(b)) if b > a));
    let slowest = means
        .windows(2)
        .filter_map(|pair| Some(pair[1]? - pair[0]?))
        .fold(f64::INFINITY, f64::min)
        / (span as f64 / TREND_PARTS as f64);
    Some(Trend {
        slope: if steady { fitted.min(slowest) } else { fitted },
        steady,
    })
}

pub struct Muster {
    settings: MusterSettings,
    samples: VecDeque<Sample>,
    /// The longest time a change has taken to become ready so far.
    ready_s: u64,
    /// When the pending change was asked for, and its size.
    asked: Option<(u64, f64)>,
    last_increase_s: Option<u64>,
    last_decrease_s: Option<u64>,
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
            last_decrease_s: None,
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

    /// Demand expected `lead_s` from now, and the reasoning in words. The level plus the rising
    /// trend over the lead — but only a steady rise (every quarter of the trend window above the
    /// one before; a jump is a new level, not a slope), and never more than
    /// `max_forecast_ratio` times the level.
    fn forecast(&self, level: f64, lead_s: u64) -> (f64, String) {
        let unit = self.settings.unit;
        let now = format!("demand {}", unit.level(level));
        if !self.settings.trend {
            return (level, format!("{now} (level only)"));
        }
        let window = self.settings.trend_window_s;
        let newest = self.samples.back().map_or(0, |s| s.at_s);
        let recent: Vec<Sample> = self
            .samples
            .iter()
            .filter(|s| s.at_s + window > newest)
            .copied()
            .collect();
        let Some(trend) = trend(&recent, window) else {
            return (level, format!("{now}, too few readings for a trend"));
        };
        if trend.slope <= 0.0 {
            return (level, format!("{now}, not rising"));
        }
        if !trend.steady {
            return (
                level,
                format!(
                    "{now}, no steady rise over {window} s (fitted {}; a jump is a level, not a trend)",
                    unit.trend(trend.slope)
                ),
            );
        }
        let rise = trend.slope * lead_s as f64;
        let cap = level * (self.settings.max_forecast_ratio - 1.0).max(0.0);
        let (forecast, capped) = if rise > cap {
            (
                level + cap,
                format!(
                    " (capped at {:.1}× the level)",
                    self.settings.max_forecast_ratio
                ),
            )
        } else {
            (level + rise, String::new())
        };
        (
            forecast,
            format!(
                "{now} rising {} over a {lead_s} s lead → {}{capped}",
                unit.trend(trend.slope),
                unit.level(forecast)
            ),
        )
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
        if self.settings.trend {
            "muster".into()
        } else {
            "level only".into()
        }
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
        let unit = self.settings.unit;
        let (forecast, outlook) = self.forecast(level, lead);
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
                    "{outlook}{}; / {target:.2} = {wanted:.1} > {current:.1}",
                    scheduled
                        .event
                        .map(|name| format!(
                            ", event {name:?} needs {}",
                            unit.level(scheduled.demand)
                        ))
                        .unwrap_or_default()
                ),
            };
        }
        let calm_for = self
            .last_increase_s
            .map_or(u64::MAX, |at| now.saturating_sub(at));
        // One step down per readiness delay: where changes may be made every second (the live
        // loop), the bound on a step would otherwise bound nothing.
        let paced = self
            .last_decrease_s
            .is_none_or(|at| now.saturating_sub(at) >= self.ready_s);
        // Not while a steady rise is projected: the scale-up rule sizes from that forecast, so
        // where a new count is taken any second, a step down during a climb is undone seconds
        // later as the forecast passes it.
        let rising = forecast > level;
        if observation.pending.is_none()
            && calm_for >= self.settings.stabilisation_s
            && paced
            && !rising
        {
            let peak = self.window_peak(sample.at_s).max(scheduled.demand);
            let floor = current * (1.0 - self.settings.max_step_down);
            let lower = self.bounded((peak / target).max(floor));
            if lower < current * (1.0 - self.settings.down_hysteresis) {
                self.asked = Some((now, lower));
                self.last_decrease_s = Some(now);
                return Decision {
                    desired: Some(lower),
                    rule: "scale_down",
                    why: format!(
                        "peak {} over the last {} s / {target:.2} = {:.1}; at most {:.0} % down: {lower:.1} < {current:.1}",
                        unit.level(peak),
                        self.settings.peak_window_s,
                        peak / target,
                        self.settings.max_step_down * 100.0
                    ),
                };
            }
        }
        Decision::hold(format!("{outlook}; capacity {current:.1}"))
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

    /// Drives `policy` as the live loop does — a reading a second, told the capacity it last
    /// asked for, nothing pending — from `capacity`; the capacity after each second and every
    /// decision that changed it.
    fn live(
        policy: &mut Muster,
        mut capacity: f64,
        demand: impl IntoIterator<Item = f64>,
    ) -> (Vec<f64>, Vec<Decision>) {
        let (mut capacities, mut decisions) = (Vec::new(), Vec::new());
        for (now, requested) in demand.into_iter().enumerate() {
            let decision = policy.decide(&seen(now as u64, capacity, requested));
            if let Some(to) = decision.desired {
                capacity = to;
                decisions.push(decision);
            }
            capacities.push(capacity);
        }
        (capacities, decisions)
    }

    /// `n` readings of `value` with a deterministic ±`spread` noise from `seed`.
    fn noisy(n: usize, value: f64, spread: f64, seed: u64) -> Vec<f64> {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
                value * (1.0 + spread * (2.0 * unit - 1.0))
            })
            .collect()
    }

    #[test]
    fn a_step_is_a_level_not_a_trend() {
        // The finding: 300 sockets at once after a short history, then flat; asked every second.
        for history in [12, 20, 60, 600] {
            let mut settings = MusterSettings::new(0.7);
            settings.unit = Unit::Count("sockets");
            let mut policy = Muster::new(settings);
            let mut demand = vec![0.0; history];
            demand.extend(vec![300.0; 600]);
            let (capacities, decisions) = live(&mut policy, 1.0, demand);
            let level = 300.0 / 0.7;
            let after: Vec<f64> = capacities[history..].to_vec();
            assert!(
                (after[0] - level).abs() < 1e-9,
                "history {history}: sized from the level at the first reading: {}",
                after[0]
            );
            let peak = after.iter().copied().fold(0.0, f64::max);
            assert!(
                peak <= level + 1e-9,
                "history {history}: never above the level's need ({peak})"
            );
            let up = decisions
                .iter()
                .filter(|d| d.rule == "scale_up")
                .collect::<Vec<_>>();
            assert_eq!(
                up.len(),
                1,
                "history {history}: one decision, not a climb: {up:?}"
            );
            assert!(up[0].why.contains("300.0 sockets"), "{}", up[0].why);
            assert!(
                !up[0].why.contains("/s²") && !up[0].why.contains("300.0/s"),
                "a gauge is not a rate: {}",
                up[0].why
            );
        }
    }

    #[test]
    fn a_steady_rise_is_projected_over_the_lead() {
        let mut policy = Muster::new(MusterSettings::new(0.8));
        // 100 rising 1/s for two minutes, asked every second.
        let demand: Vec<f64> = (0..120).map(|t| 100.0 + t as f64).collect();
        let (capacities, decisions) = live(&mut policy, 125.0, demand);
        let last = decisions.last().expect("scaled up");
        // Level 219, slope 1/s over a 65 s lead (60 s ready + 5 s margin) → 284 / 0.8 = 355,
        // less what the 2 % hysteresis lets wait.
        assert!(
            capacities[119] <= 355.0 + 1e-9 && capacities[119] >= 355.0 / 1.02,
            "{}: {}",
            capacities[119],
            last.why
        );
        assert!(last.why.contains("rising 1.00/s²"), "{}", last.why);
        // The same with the level only: 219 / 0.8.
        let mut level_only = Muster::new(MusterSettings::level_only(0.8));
        let demand: Vec<f64> = (0..120).map(|t| 100.0 + t as f64).collect();
        let (capacities, _) = live(&mut level_only, 125.0, demand);
        assert!(capacities[119] <= 219.0 / 0.8 && capacities[119] >= 219.0 / 0.8 / 1.02);
    }

    #[test]
    fn the_projection_is_at_most_twice_the_level() {
        let mut policy = Muster::new(MusterSettings::new(1.0));
        // From 10 rising 5/s: after a minute, level 305 + 5 × 65 = 630 > 2 × 305.
        let demand: Vec<f64> = (0..60).map(|t| 10.0 + 5.0 * t as f64).collect();
        let (capacities, decisions) = live(&mut policy, 10.0, demand);
        // Level 305 at the end; asks below 2 % more wait (hysteresis), so within 2 % of 610.
        assert!(
            capacities[59] <= 610.0 && capacities[59] >= 610.0 / 1.02,
            "{}",
            capacities[59]
        );
        assert!(
            decisions.last().expect("up").why.contains("capped at 2.0×"),
            "{:?}",
            decisions.last()
        );
    }

    #[test]
    fn noise_before_a_jump_is_not_projected() {
        // A noisy level (±3 %), then a jump to twice it: whatever the noise did before, the
        // jump adds at most a few per cent to the level's need.
        for seed in 0..200 {
            let mut policy = Muster::new(MusterSettings::new(0.8));
            let mut demand = noisy(90, 300.0, 0.03, seed);
            demand.extend(noisy(30, 600.0, 0.03, seed + 1_000));
            let (capacities, _) = live(&mut policy, 375.0, demand);
            let peak = capacities.iter().copied().fold(0.0, f64::max);
            assert!(
                peak <= 600.0 * 1.03 * 1.05 / 0.8,
                "seed {seed}: {peak} for a level of at most {}",
                600.0 * 1.03 / 0.8
            );
        }
    }

    #[test]
    fn asked_every_second_scale_down_takes_one_step_per_readiness_delay() {
        let mut policy = Muster::new(MusterSettings::new(0.5));
        let mut demand = vec![100.0; 10];
        demand.extend(vec![10.0; 600]);
        let (capacities, decisions) = live(&mut policy, 200.0, demand);
        let downs: Vec<&Decision> = decisions
            .iter()
            .filter(|d| d.rule == "scale_down")
            .collect();
        // No increase, so no stabilisation wait; the 60 s peak (100 until 10 s) holds 200 until
        // 70 s. Then 150, 112.5, … — one step per readiness delay (60 s), not one a second.
        assert!(downs.len() >= 3, "{downs:?}");
        for pair in capacities.windows(2) {
            assert!(pair[1] >= pair[0] * 0.75 - 1e-9, "at most 25 % a step");
        }
        let steps: Vec<usize> = capacities
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[1] < w[0])
            .map(|(i, _)| i + 1)
            .collect();
        assert_eq!(steps.first(), Some(&70), "steps at {steps:?}");
        for pair in steps.windows(2) {
            assert!(pair[1] - pair[0] >= 60, "steps at {steps:?}");
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
