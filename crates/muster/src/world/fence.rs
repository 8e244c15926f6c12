//! A shard's fence: until when this node may run it. On one node it holds forever; in a
//! clustered world each lease renewal moves it to a point safely before the lease's expiry on
//! the database's clock, so a node that cannot renew stops ticking, acknowledging and writing
//! checkpoints of the shard before another node can take it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

pub struct Fence {
    base: Instant,
    /// Milliseconds after `base` until which the shard may run; `u64::MAX`: forever.
    until_ms: AtomicU64,
}

impl Fence {
    /// A fence that always holds (a world on one node).
    pub fn forever() -> Fence {
        Fence {
            base: Instant::now(),
            until_ms: AtomicU64::new(u64::MAX),
        }
    }

    /// A fence that holds until `deadline`.
    pub fn until(deadline: Instant) -> Fence {
        let base = Instant::now();
        Fence {
            base,
            until_ms: AtomicU64::new(deadline.saturating_duration_since(base).as_millis() as u64),
        }
    }

    /// Moves the deadline to `deadline`: never back (a late renewal's answer changes nothing),
    /// and never once it has run out or been revoked.
    pub fn extend_to(&self, deadline: Instant) {
        let ms = deadline.saturating_duration_since(self.base).as_millis() as u64;
        let _ = self
            .until_ms
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |until| {
                (until != 0 && self.holds_until(until)).then_some(until.max(ms))
            });
    }

    /// Ends it now: the shard stops at its next check.
    pub fn revoke(&self) {
        self.until_ms.store(0, Ordering::Release);
    }

    /// Whether the shard may still run.
    pub fn holds(&self) -> bool {
        self.holds_until(self.until_ms.load(Ordering::Acquire))
    }

    fn holds_until(&self, until: u64) -> bool {
        until == u64::MAX || (self.base.elapsed().as_millis() as u64) < until
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn holds_until_its_deadline_and_never_moves_back() {
        let fence = Fence::until(Instant::now() + Duration::from_millis(200));
        assert!(fence.holds());
        fence.extend_to(Instant::now());
        assert!(fence.holds(), "an earlier deadline does not shorten it");
        fence.revoke();
        assert!(!fence.holds());
        fence.extend_to(Instant::now() + Duration::from_secs(60));
        assert!(!fence.holds(), "a revoked fence stays down");
        // A fence whose deadline, 500 ms after it was made, was a second ago.
        let short = Fence {
            base: Instant::now() - Duration::from_millis(1500),
            until_ms: AtomicU64::new(500),
        };
        assert!(!short.holds());
        short.extend_to(Instant::now() + Duration::from_secs(60));
        assert!(!short.holds(), "a fence that ran out stays down");
        assert!(Fence::forever().holds());
    }
}
