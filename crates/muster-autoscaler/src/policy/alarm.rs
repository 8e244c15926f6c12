//! DynamoDB auto scaling as it works behind its CloudWatch alarms, and the two changes Space Ape
//! tried: the alarm evaluates one-minute metrics that arrive minutes late; it fires
//! after `breaches` consecutive minutes above the target utilisation and sets capacity to the
//! metric divided by the target; a second alarm scales down after 15 minutes below the target
//! less 20 points.

use super::{Decision, Observation, Policy};

/// Which of Space Ape's policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmKind {
    /// DynamoDB's own: five breaches, on consumed capacity.
    Vanilla,
    /// Hypothesis 1: one breach, on consumed capacity.
    OneBreach,
    /// Hypothesis 2: one breach, on the actual request count (and sized from it).
    OneBreachOnRequests,
}

/// Minutes below the low threshold before scaling down (DynamoDB's scale-down alarm).
const DOWN_BREACHES: u32 = 15;

pub struct Alarm {
    kind: AlarmKind,
    target: f64,
    min: f64,
    max: f64,
    last_minute: Option<u64>,
    above: u32,
    below: u32,
}

impl Alarm {
    /// `target`: utilisation in (0, 1].
    pub fn new(kind: AlarmKind, target: f64, min: f64, max: f64) -> Alarm {
        Alarm {
            kind,
            target,
            min,
            max,
            last_minute: None,
            above: 0,
            below: 0,
        }
    }

    fn breaches_needed(&self) -> u32 {
        match self.kind {
            AlarmKind::Vanilla => 5,
            AlarmKind::OneBreach | AlarmKind::OneBreachOnRequests => 1,
        }
    }
}

impl Policy for Alarm {
    fn name(&self) -> String {
        match self.kind {
            AlarmKind::Vanilla => "vanilla",
            AlarmKind::OneBreach => "hypothesis 1",
            AlarmKind::OneBreachOnRequests => "hypothesis 2",
        }
        .into()
    }

    fn decide(&mut self, observation: &Observation) -> Decision {
        let Some(metric) = observation.minute else {
            return Decision::hold("no minute metric yet");
        };
        if self.last_minute.is_some_and(|m| m >= metric.minute) {
            return Decision::hold("no new minute metric");
        }
        self.last_minute = Some(metric.minute);
        let measured = match self.kind {
            AlarmKind::OneBreachOnRequests => metric.requested,
            AlarmKind::Vanilla | AlarmKind::OneBreach => metric.consumed,
        };
        let utilisation = measured / metric.provisioned.max(f64::EPSILON);
        if utilisation > self.target {
            self.above += 1;
        } else {
            self.above = 0;
        }
        if utilisation < self.target - 0.2 {
            self.below += 1;
        } else {
            self.below = 0;
        }
        if observation.pending.is_some() {
            return Decision::hold("a capacity change is in progress");
        }
        // max then min rather than clamp, which panics if the bounds cross.
        let sized = (measured / self.target).max(self.min).min(self.max);
        if self.above >= self.breaches_needed() && sized > observation.provisioned {
            self.above = 0;
            return Decision {
                desired: Some(sized),
                rule: "scale_up",
                why: format!(
                    "minute {}: {measured:.1}/s is {:.0} % of {:.1} > {:.0} % for {} minute(s); {measured:.1} / {:.2} = {sized:.1}",
                    metric.minute,
                    utilisation * 100.0,
                    metric.provisioned,
                    self.target * 100.0,
                    self.breaches_needed(),
                    self.target
                ),
            };
        }
        if self.below >= DOWN_BREACHES && sized < observation.provisioned {
            self.below = 0;
            return Decision {
                desired: Some(sized),
                rule: "scale_down",
                why: format!(
                    "minute {}: {:.0} % < {:.0} % for {DOWN_BREACHES} minutes; {measured:.1} / {:.2} = {sized:.1}",
                    metric.minute,
                    utilisation * 100.0,
                    (self.target - 0.2) * 100.0,
                    self.target
                ),
            };
        }
        Decision::hold(format!(
            "minute {}: utilisation {:.0} %",
            metric.minute,
            utilisation * 100.0
        ))
    }
}
