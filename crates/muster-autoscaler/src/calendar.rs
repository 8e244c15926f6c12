//! Scheduled live events: when demand will rise, and by how much, known in advance.
//!
//! ```toml
//! [[event]]
//! name = "Winter festival"
//! start_s = 3600          # on the policy's clock: seconds from the start in the simulator,
//! end_s = 7200            # unix seconds for `muster autoscale run`
//! expected_demand = 400   # requests/s, or: multiplier = 3.0 (times the demand when it begins)
//! lead_time_s = 300       # optional: be ready this long before; at least the learned delay
//! ```

use serde::{Deserialize, Serialize};

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    pub name: String,
    pub start_s: u64,
    pub end_s: u64,
    #[serde(default)]
    pub expected_demand: Option<f64>,
    #[serde(default)]
    pub multiplier: Option<f64>,
    #[serde(default)]
    pub lead_time_s: Option<u64>,
}

/// The events, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calendar {
    events: Vec<Event>,
    /// The demand level when each event's window opened (for multipliers), by index.
    baselines: Vec<Option<f64>>,
}

/// A calendar that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    #[error("calendar is not valid TOML: {0}")]
    Syntax(String),
    #[error("event {index} ({name:?}): {problem}")]
    Event {
        index: usize,
        name: String,
        problem: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    event: Vec<Event>,
}

/// What the schedule asks for now.
#[derive(Debug, Clone, PartialEq)]
pub struct Need {
    /// Requests per second to be ready for (0 when no event is near).
    pub demand: f64,
    /// The event that asks for it.
    pub event: Option<String>,
}

impl Calendar {
    /// Parses and checks a calendar file.
    pub fn from_toml(text: &str) -> Result<Calendar, CalendarError> {
        let file: File =
            toml::from_str(text).map_err(|e| CalendarError::Syntax(e.message().to_owned()))?;
        Calendar::new(file.event)
    }

    pub fn new(events: Vec<Event>) -> Result<Calendar, CalendarError> {
        for (index, event) in events.iter().enumerate() {
            check(index, event)?;
        }
        Ok(Calendar {
            baselines: vec![None; events.len()],
            events,
        })
    }

    /// Adds one event (from the API), checked like a file's.
    pub fn add(&mut self, event: Event) -> Result<(), CalendarError> {
        check(self.events.len(), &event)?;
        self.events.push(event);
        self.baselines.push(None);
        Ok(())
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The demand to be ready for at `now_s`, with `lead_s` the learned time capacity takes to
    /// become ready (an event's own lead time may only lengthen it) and `level` the demand
    /// expected by then (the baseline of a multiplier, taken when the event's window opens).
    pub fn need(&mut self, now_s: u64, lead_s: u64, level: f64) -> Need {
        let mut need = Need {
            demand: 0.0,
            event: None,
        };
        for (event, baseline) in self.events.iter().zip(self.baselines.iter_mut()) {
            let lead = event.lead_time_s.unwrap_or(0).max(lead_s);
            let opens = event.start_s.saturating_sub(lead);
            if now_s < opens || now_s >= event.end_s {
                continue;
            }
            let demand = match (event.expected_demand, event.multiplier) {
                (Some(demand), _) => demand,
                (None, Some(multiplier)) => *baseline.get_or_insert(level) * multiplier,
                (None, None) => 0.0,
            };
            if demand > need.demand {
                need = Need {
                    demand,
                    event: Some(event.name.clone()),
                };
            }
        }
        need
    }
}

/// Why `event` (the `index`th) cannot be used, if it cannot.
fn check(index: usize, event: &Event) -> Result<(), CalendarError> {
    let problem = |problem: &str| CalendarError::Event {
        index,
        name: event.name.clone(),
        problem: problem.into(),
    };
    if event.name.trim().is_empty() {
        return Err(problem("name is empty"));
    }
    if event.end_s <= event.start_s {
        return Err(problem("end_s must be after start_s"));
    }
    match (event.expected_demand, event.multiplier) {
        (Some(d), None) if d.is_finite() && d > 0.0 => {}
        (None, Some(m)) if m.is_finite() && m > 0.0 => {}
        (Some(_), Some(_)) | (None, None) => {
            return Err(problem(
                "give exactly one of expected_demand and multiplier",
            ))
        }
        _ => {
            return Err(problem(
                "expected_demand and multiplier must be positive numbers",
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_open_a_lead_before_their_start() {
        let mut calendar = Calendar::from_toml(
            "[[event]]\nname = \"festival\"\nstart_s = 1000\nend_s = 2000\nexpected_demand = 400\nlead_time_s = 120\n",
        )
        .expect("valid");
        assert_eq!(calendar.need(700, 60, 10.0).demand, 0.0);
        assert_eq!(calendar.need(880, 60, 10.0).demand, 400.0, "its own lead");
        assert_eq!(
            calendar.need(800, 200, 10.0).demand,
            400.0,
            "a longer learned lead wins"
        );
        assert_eq!(calendar.need(2000, 60, 10.0).demand, 0.0, "over");
    }

    #[test]
    fn a_multiplier_applies_to_the_level_when_the_window_opens() {
        let mut calendar = Calendar::new(vec![Event {
            name: "double".into(),
            start_s: 100,
            end_s: 200,
            expected_demand: None,
            multiplier: Some(2.0),
            lead_time_s: None,
        }])
        .expect("valid");
        assert_eq!(calendar.need(50, 50, 30.0).demand, 60.0);
        assert_eq!(
            calendar.need(150, 50, 90.0).demand,
            60.0,
            "the baseline stays"
        );
    }

    #[test]
    fn bad_calendars_say_what_is_wrong() {
        let error = |text: &str| Calendar::from_toml(text).expect_err("refused").to_string();
        assert!(
            error("[[event]]\nname = \"x\"\nstart_s = 5\nend_s = 5\nmultiplier = 2.0\n")
                .contains("end_s must be after start_s")
        );
        assert!(error("[[event]]\nname = \"x\"\nstart_s = 5\nend_s = 9\n").contains("exactly one"));
        assert!(
            error("[[event]]\nname = \"x\"\nstart_s = 5\nend_s = 9\nexpected_demand = -4.0\n")
                .contains("positive")
        );
        assert!(error("[[event]]\nname = \"x\"\nstart = 5\n").contains("unknown field"));
        assert!(error("[[event]\n").contains("not valid TOML"));
        assert!(
            error("[[event]]\nname = \"x\"\nstart_s = -5\nend_s = 9\nmultiplier = 2.0\n")
                .contains("not valid TOML")
        );
    }
}
