//! Policies: given what has been observed up to now, the capacity to have.
//!
//! A policy sees the world only through [`Observation`]s — what a real autoscaler can read — and
//! answers with a [`Decision`] that names its rule and inputs, so every change can be explained
//! (and a dry run shows what would have been done).

mod alarm;
mod muster;

pub use alarm::{Alarm, AlarmKind};
pub use muster::{Muster, MusterSettings, Unit};

/// What a policy may read at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    /// Seconds since the start.
    pub now_s: u64,
    /// Capacity in force now.
    pub provisioned: f64,
    /// Capacity asked for and not yet in force (the largest pending request), if any.
    pub pending: Option<f64>,
    /// The newest per-second demand sample the policy can see (it may lag `now_s`): requests
    /// wanted, served or not.
    pub demand: Option<Sample>,
    /// The newest closed one-minute metric the policy can see (CloudWatch style), if any.
    pub minute: Option<MinuteMetric>,
}

/// Requests wanted in one second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub at_s: u64,
    pub requested: f64,
}

/// One minute's sums, divided by 60: per-second averages, as an alarm evaluates them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MinuteMetric {
    /// The minute's index (minute `m` covers seconds `60m .. 60m + 60`).
    pub minute: u64,
    /// Capacity consumed (served requests) per second.
    pub consumed: f64,
    /// Requests wanted per second, served or throttled.
    pub requested: f64,
    /// Capacity provisioned during the minute.
    pub provisioned: f64,
}

/// A policy's answer at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The capacity to have; `None` keeps what there is.
    pub desired: Option<f64>,
    /// The rule that decided (`scale_up`, `scale_down`, `schedule`, `hold`, …).
    pub rule: &'static str,
    /// The inputs and the arithmetic, for a person.
    pub why: String,
}

impl Decision {
    pub fn hold(why: impl Into<String>) -> Decision {
        Decision {
            desired: None,
            rule: "hold",
            why: why.into(),
        }
    }
}

/// Decides capacity from observations, one call per second.
pub trait Policy {
    /// The policy's name in tables and charts.
    fn name(&self) -> String;

    fn decide(&mut self, observation: &Observation) -> Decision;
}
