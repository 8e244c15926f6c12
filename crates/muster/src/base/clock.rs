//! Wall-clock time: the store keeps unix milliseconds, the API shows RFC 3339, and token expiry
//! reads a [`Clock`] that tests can stop and move instead of sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub fn now_secs() -> i64 {
    now_ms() / 1000
}

/// The time as the parts of the server that must be testable without waiting read it (session
/// and refresh token expiry). Cheap to clone; the system clock unless built [`Clock::manual`].
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// Set for a manual clock: the unix milliseconds it shows.
    manual_ms: Option<Arc<AtomicI64>>,
}

impl Clock {
    /// The system's wall clock.
    pub fn system() -> Clock {
        Clock::default()
    }

    /// A clock stopped at the system time now, which moves only when told to
    /// ([`Clock::advance`]). For tests: a token expires when the test says so, not after a
    /// sleep.
    pub fn manual() -> Clock {
        Clock {
            manual_ms: Some(Arc::new(AtomicI64::new(now_ms()))),
        }
    }

    pub fn now_ms(&self) -> i64 {
        match &self.manual_ms {
            Some(at) => at.load(Ordering::Acquire),
            None => now_ms(),
        }
    }

    pub fn now_secs(&self) -> i64 {
        self.now_ms().div_euclid(1000)
    }

    /// Moves a manual clock forward by `by` (every clone sees it); a system clock is not moved.
    pub fn advance(&self, by: Duration) {
        if let Some(at) = &self.manual_ms {
            at.fetch_add(by.as_millis() as i64, Ordering::AcqRel);
        }
    }
}

/// `2026-11-21T01:02:03Z`, the form Nakama's API uses for times.
pub fn rfc3339(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_clones_share_it() {
        let clock = Clock::manual();
        let twin = clock.clone();
        let start = clock.now_ms();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(clock.now_ms(), start, "stopped");
        twin.advance(Duration::from_secs(2));
        assert_eq!(clock.now_ms(), start + 2000);
        let system = Clock::system();
        system.advance(Duration::from_secs(3600));
        assert!(
            (system.now_ms() - now_ms()).abs() < 1000,
            "the system clock is not moved"
        );
    }

    #[test]
    fn formats_whole_seconds_in_utc() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_795_000_000_999), "2026-11-18T11:06:40Z");
    }
}
