//! A circuit breaker per provider: after `threshold` consecutive failures to reach the provider
//! it opens, and calls fail at once for `open_for`; then one probe call is let through
//! (half-open): its success closes the breaker, its failure opens it again. A probe whose
//! outcome never comes (its caller went away) is replaced by another after `open_for`.
//!
//! Time is passed in, so the states are tested without waiting.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go through; `failures` consecutive ones have failed so far.
    Closed { failures: u32 },
    /// Calls fail at once until `until`.
    Open { until: Instant },
    /// One probe call, started at `probe_since`, is deciding.
    HalfOpen { probe_since: Instant },
}

pub struct Breaker {
    threshold: u32,
    open_for: Duration,
    state: Mutex<BreakerState>,
}

impl Breaker {
    /// A breaker opening after `threshold` consecutive failures (0: never) for `open_for`.
    pub fn new(threshold: u32, open_for: Duration) -> Breaker {
        Breaker {
            threshold,
            open_for,
            state: Mutex::new(BreakerState::Closed { failures: 0 }),
        }
    }

    pub fn state(&self) -> BreakerState {
        *self.state.lock()
    }

    /// Whether a call may go out at `now`; `Err` is how long until the breaker lets a probe
    /// through.
    pub fn admit(&self, now: Instant) -> Result<(), Duration> {
        let mut state = self.state.lock();
        match *state {
            BreakerState::Closed { .. } => Ok(()),
            BreakerState::Open { until } => {
                if now >= until {
                    *state = BreakerState::HalfOpen { probe_since: now };
                    Ok(())
                } else {
                    Err(until - now)
                }
            }
            BreakerState::HalfOpen { probe_since } => {
                let lost_at = probe_since + self.open_for;
                if now >= lost_at {
                    // The probe never reported: let another one through.
                    *state = BreakerState::HalfOpen { probe_since: now };
                    Ok(())
                } else {
                    Err(lost_at - now)
                }
            }
        }
    }

    /// The provider answered: the breaker closes.
    pub fn success(&self) {
        *self.state.lock() = BreakerState::Closed { failures: 0 };
    }

    /// The provider could not be reached at `now`. Returns true when this failure opened the
    /// breaker.
    pub fn failure(&self, now: Instant) -> bool {
        let mut state = self.state.lock();
        match *state {
            BreakerState::Closed { failures } => {
                let failures = failures.saturating_add(1);
                if self.threshold > 0 && failures >= self.threshold {
                    *state = BreakerState::Open {
                        until: now + self.open_for,
                    };
                    true
                } else {
                    *state = BreakerState::Closed { failures };
                    false
                }
            }
            BreakerState::HalfOpen { .. } => {
                *state = BreakerState::Open {
                    until: now + self.open_for,
                };
                true
            }
            // A call let through before the breaker opened, failing late: it stays open as is.
            BreakerState::Open { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN_FOR: Duration = Duration::from_secs(30);

    #[test]
    fn opens_after_consecutive_failures_only() {
        let breaker = Breaker::new(3, OPEN_FOR);
        let now = Instant::now();
        assert!(!breaker.failure(now));
        assert!(!breaker.failure(now));
        breaker.success();
        assert_eq!(breaker.state(), BreakerState::Closed { failures: 0 });
        assert!(!breaker.failure(now));
        assert!(!breaker.failure(now));
        assert_eq!(breaker.admit(now), Ok(()));
        assert!(breaker.failure(now));
        assert_eq!(
            breaker.state(),
            BreakerState::Open {
                until: now + OPEN_FOR
            }
        );
        let later = now + Duration::from_secs(10);
        assert_eq!(breaker.admit(later), Err(Duration::from_secs(20)));
    }

    #[test]
    fn half_open_probe_closes_or_reopens() {
        let breaker = Breaker::new(1, OPEN_FOR);
        let now = Instant::now();
        assert!(breaker.failure(now));
        let after = now + OPEN_FOR;
        // One probe goes through; the others wait for its outcome.
        assert_eq!(breaker.admit(after), Ok(()));
        assert_eq!(
            breaker.state(),
            BreakerState::HalfOpen { probe_since: after }
        );
        assert!(breaker.admit(after + Duration::from_secs(1)).is_err());
        // The probe fails: open again, for a whole period.
        let failed_at = after + Duration::from_secs(2);
        assert!(breaker.failure(failed_at));
        assert_eq!(
            breaker.admit(failed_at + Duration::from_secs(1)),
            Err(OPEN_FOR - Duration::from_secs(1))
        );
        // The next probe succeeds: closed, every call goes through.
        let next = failed_at + OPEN_FOR;
        assert_eq!(breaker.admit(next), Ok(()));
        breaker.success();
        assert_eq!(breaker.state(), BreakerState::Closed { failures: 0 });
        assert_eq!(breaker.admit(next), Ok(()));
        assert_eq!(breaker.admit(next), Ok(()));
    }

    #[test]
    fn a_lost_probe_is_replaced() {
        let breaker = Breaker::new(1, OPEN_FOR);
        let now = Instant::now();
        breaker.failure(now);
        assert_eq!(breaker.admit(now + OPEN_FOR), Ok(()));
        // Its caller went away without a word: after another period a new probe goes.
        assert!(breaker.admit(now + OPEN_FOR + OPEN_FOR / 2).is_err());
        assert_eq!(breaker.admit(now + OPEN_FOR * 2), Ok(()));
    }

    #[test]
    fn late_failures_keep_it_open_as_it_is_and_zero_never_opens() {
        let breaker = Breaker::new(1, OPEN_FOR);
        let now = Instant::now();
        assert!(breaker.failure(now));
        assert!(!breaker.failure(now + Duration::from_secs(5)));
        assert_eq!(
            breaker.state(),
            BreakerState::Open {
                until: now + OPEN_FOR
            }
        );

        let never = Breaker::new(0, OPEN_FOR);
        for _ in 0..100 {
            assert!(!never.failure(now));
        }
        assert_eq!(never.admit(now), Ok(()));
    }
}
