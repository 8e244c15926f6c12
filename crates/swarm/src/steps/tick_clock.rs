//! Where the server's ticks fall, learned from when its states arrive, so a player can send each
//! input a little before the next tick (`align = "tick"`).
//!
//! A state leaves the server at a tick and arrives some delay later; it never arrives before its
//! tick. So the earliest arrivals mark the ticks best. Locking once on the first state (as a
//! first version did) left every player whose first state came late — common while thousands
//! of players join at once — sending just after the tick for the whole match, each input
//! waiting a full period: 1-2 % of players at ~80 ms RTT. Here the estimate is corrected every
//! [`WINDOW`] states by the earliest arrival among them, in either direction: it moves earlier
//! when states come before the predicted tick, later when even the earliest of them was late
//! (the server's schedule slipped).

use std::time::Duration;

use tokio::time::Instant;

/// States per correction: one second at 15 Hz.
pub const WINDOW: u32 = 15;

#[derive(Debug, Clone)]
pub struct TickClock {
    period: Duration,
    /// A predicted tick (as seen by this client: the tick plus the smallest delivery delay).
    anchor: Instant,
    /// The smallest signed offset (ns) of an arrival from its predicted tick in this window.
    window_min: i128,
    window_len: u32,
}

impl TickClock {
    /// Starts from the arrival of one state, taken as a tick.
    pub fn new(first_arrival: Instant, period: Duration) -> TickClock {
        TickClock {
            period,
            anchor: first_arrival,
            window_min: i128::MAX,
            window_len: 0,
        }
    }

    /// Records a state's arrival. Returns how far the predicted ticks moved (ns, negative:
    /// earlier) when this arrival closed a window and the estimate changed.
    pub fn observe(&mut self, arrival: Instant) -> Option<i128> {
        let offset = self.offset(arrival);
        self.window_min = self.window_min.min(offset);
        self.window_len += 1;
        if self.window_len < WINDOW {
            return None;
        }
        let shift = self.window_min;
        self.window_min = i128::MAX;
        self.window_len = 0;
        if shift == 0 {
            return None;
        }
        self.anchor = shifted(self.anchor, shift);
        Some(shift)
    }

    /// The first instant after `after` that falls `lead` before a predicted tick.
    pub fn next_send(&self, after: Instant, lead: Duration) -> Instant {
        let target = shifted(self.anchor, -(lead.as_nanos() as i128));
        let period = self.period.as_nanos() as i128;
        let since = signed_nanos(after, target);
        let periods = since.div_euclid(period) + 1;
        shifted(target, periods * period)
    }

    /// `arrival`'s offset from the nearest predicted tick, in (-period/2, period/2].
    fn offset(&self, arrival: Instant) -> i128 {
        let period = self.period.as_nanos() as i128;
        let mut offset = signed_nanos(arrival, self.anchor).rem_euclid(period);
        if offset > period / 2 {
            offset -= period;
        }
        offset
    }
}

/// `a - b` in nanoseconds.
fn signed_nanos(a: Instant, b: Instant) -> i128 {
    if a >= b {
        (a - b).as_nanos() as i128
    } else {
        -((b - a).as_nanos() as i128)
    }
}

fn shifted(at: Instant, nanos: i128) -> Instant {
    let magnitude = Duration::from_nanos(nanos.unsigned_abs().min(u64::MAX as u128) as u64);
    if nanos >= 0 {
        at + magnitude
    } else {
        at.checked_sub(magnitude).unwrap_or(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_micros(66_667);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Feeds one window of states for ticks at `tick0 + k * PERIOD` (k from `first`), each
    /// delayed by `delay(k)`.
    fn feed(
        clock: &mut TickClock,
        tick0: Instant,
        first: u32,
        delay: impl Fn(u32) -> Duration,
    ) -> Option<i128> {
        let mut moved = None;
        for k in first..first + WINDOW {
            moved = clock.observe(tick0 + PERIOD * k + delay(k));
        }
        moved
    }

    #[test]
    fn a_late_first_lock_is_corrected_within_one_window() {
        let tick0 = Instant::now();
        // The first state came 30 ms late; later ones come 1-3 ms after their tick.
        let mut clock = TickClock::new(tick0 + ms(30), PERIOD);
        let moved = feed(&mut clock, tick0, 1, |k| ms(1 + u64::from(k % 3)));
        assert_eq!(moved, Some(-(ms(29).as_nanos() as i128)));
        // Now inputs go out 10 ms before the true tick plus the least delay.
        let after = tick0 + PERIOD * 20;
        let send = clock.next_send(after, ms(10));
        assert_eq!(send, tick0 + PERIOD * 21 + ms(1) - ms(10));
    }

    #[test]
    fn a_schedule_that_slips_later_is_followed() {
        let tick0 = Instant::now();
        let mut clock = TickClock::new(tick0 + ms(1), PERIOD);
        // The server's ticks slip 12 ms later; even the earliest state shows it.
        let moved = feed(&mut clock, tick0 + ms(12), 1, |_| ms(1));
        assert_eq!(moved, Some(ms(12).as_nanos() as i128));
    }

    #[test]
    fn occasional_late_states_do_not_move_a_good_estimate() {
        let tick0 = Instant::now();
        let mut clock = TickClock::new(tick0 + ms(1), PERIOD);
        let moved = feed(&mut clock, tick0, 1, |k| {
            if k % 4 == 0 {
                ms(25)
            } else {
                ms(1)
            }
        });
        assert_eq!(moved, None);
        assert_eq!(
            clock.next_send(tick0 + PERIOD * 3, ms(10)),
            tick0 + PERIOD * 4 + ms(1) - ms(10)
        );
    }

    #[test]
    fn next_send_is_strictly_after_the_given_instant() {
        let tick0 = Instant::now();
        let clock = TickClock::new(tick0, PERIOD);
        let exactly = tick0 + PERIOD - ms(10);
        assert_eq!(clock.next_send(exactly, ms(10)), exactly + PERIOD);
        assert_eq!(clock.next_send(exactly - ms(1), ms(10)), exactly);
    }
}
