//! The seed's two traffic traces (Space Ape's experiment), one demand value per second.

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
    }
}
