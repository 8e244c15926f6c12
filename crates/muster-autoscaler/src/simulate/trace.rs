//! Traffic traces, one demand value per second: Space Ape's two (from its DynamoDB experiment) and
//! two that tell a trend from a jump — a step (a launch: everyone at once, then flat) and a
//! sawtooth (steady climbs, each ended by a sudden drop).

/// Demand, in requests per second, for each second of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub name: &'static str,
    pub demand: Vec<f64>,
}

/// Appends `minutes` of demand moving linearly from `from` to `to` (per second).
fn ramp(demand: &mut Vec<f64>, from: f64, to: f64, minutes: f64) {
    let seconds = (minutes * 60.0).round() as usize;
    for s in 0..seconds {
        demand.push(from + (to - from) * (s as f64 + 1.0) / seconds as f64);
    }
}

impl Trace {
    /// 15 min at 25 writes/s, a steady climb to 300 over 45 min, down to 25 over 15 min, then 30
    /// min steady.
    pub fn bell_curve() -> Trace {
        let mut demand = Vec::new();
        ramp(&mut demand, 25.0, 25.0, 15.0);
        ramp(&mut demand, 25.0, 300.0, 45.0);
        ramp(&mut demand, 300.0, 25.0, 15.0);
        ramp(&mut demand, 25.0, 25.0, 30.0);
        Trace {
            name: "bell curve",
            demand,
        }
    }

    /// 15 min at 25 writes/s, to 300 within 5 min, then down 3 writes/s every minute until back at
    /// 25, then 15 min steady.
    pub fn top_heavy() -> Trace {
        let mut demand = Vec::new();
        ramp(&mut demand, 25.0, 25.0, 15.0);
        ramp(&mut demand, 25.0, 300.0, 5.0);
        let decline_minutes = (300.0 - 25.0) / 3.0;
        ramp(&mut demand, 300.0, 25.0, decline_minutes);
        ramp(&mut demand, 25.0, 25.0, 15.0);
        Trace {
            name: "top heavy",
            demand,
        }
    }

    /// 10 min at 0, then 300 at once and flat for 50 min: a launch or a reconnect storm. Its
    /// level needs capacity; it has no trend to project.
    pub fn step() -> Trace {
        let mut demand = vec![0.0; 10 * 60];
        demand.extend(vec![300.0; 50 * 60]);
        Trace {
            name: "step",
            demand,
        }
    }

    /// 10 min at 25, then six teeth, each a steady climb from 25 to 300 over 5 min and a drop
    /// back to 25 at once (a round of a tournament filling up, then ending), then 10 min at 25.
    /// The climbs are real trends (as steep as top heavy's); the drops are jumps down.
    pub fn sawtooth() -> Trace {
        let mut demand = Vec::new();
        ramp(&mut demand, 25.0, 25.0, 10.0);
        for _ in 0..6 {
            ramp(&mut demand, 25.0, 300.0, 5.0);
        }
        ramp(&mut demand, 25.0, 25.0, 10.0);
        Trace {
            name: "sawtooth",
            demand,
        }
    }

    /// The four traces of the experiment: Space Ape's two, then the step and the sawtooth.
    pub fn all() -> [Trace; 4] {
        [
            Trace::bell_curve(),
            Trace::top_heavy(),
            Trace::step(),
            Trace::sawtooth(),
        ]
    }

    /// The highest demand of any second.
    pub fn peak(&self) -> f64 {
        self.demand.iter().copied().fold(0.0, f64::max)
    }

    /// `base` scaled by `factor` from `start_s` to `end_s`: a live event on top of a trace.
    pub fn with_event(mut self, start_s: usize, end_s: usize, factor: f64) -> Trace {
        let end = end_s.min(self.demand.len());
        for d in &mut self.demand[start_s.min(end)..end] {
            *d *= factor;
        }
        self
    }

    pub fn duration_s(&self) -> u64 {
        self.demand.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_shapes() {
        let bell = Trace::bell_curve();
        assert_eq!(bell.demand[0], 25.0);
        assert_eq!(
            bell.demand[60 * 60 - 1],
            300.0,
            "peak at the end of the climb"
        );
        assert_eq!(bell.duration_s(), 105 * 60);
        let top = Trace::top_heavy();
        assert_eq!(
            top.demand[20 * 60 - 1],
            300.0,
            "peak 5 min after the quiet 15"
        );
        assert!(
            (top.demand[21 * 60 - 1] - 297.0).abs() < 1e-9,
            "then 3 less per minute"
        );
        let step = Trace::step();
        assert_eq!(step.demand[599], 0.0);
        assert_eq!(step.demand[600], 300.0, "all at once");
        assert_eq!(step.peak(), 300.0);
        let saw = Trace::sawtooth();
        assert_eq!(saw.duration_s(), 50 * 60);
        assert_eq!(saw.demand[15 * 60 - 1], 300.0, "top of the first tooth");
        assert!(
            (saw.demand[15 * 60] - 25.0 - 275.0 / 300.0).abs() < 1e-9,
            "dropped, climbing again"
        );
    }
}
