//! What may reach one origin: at most `concurrency` calls at once, at most `per_second` calls
//! (with a burst), and nothing while the origin has asked for a pause (`Retry-After`). Every call
//! to an origin goes through its [`Origin`], so even thousands of keys expiring in the same second
//! cannot push it past its budget: the calls queue here instead.
//!
//! The pause an origin asks for is its own to name but not its own to bound: it is capped at
//! `max_retry_after`: a hostile or broken origin answering `Retry-After: 18446744073709551615`
//! pauses its calls for `max_retry_after` and no longer (and never overflows a clock).

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Why an origin call produced no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    #[error("the origin did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the origin answered HTTP {0}")]
    Status(u16),
    /// HTTP 429 or 503, with the pause it asked for.
    #[error("the origin asked to slow down")]
    RateLimited { retry_after: Option<Duration> },
    #[error("the origin's answer is not what was expected: {0}")]
    Malformed(String),
    #[error("the origin cannot be reached: {0}")]
    Unreachable(String),
    /// The fetch ended without an answer (it panicked or its task was cancelled); nothing was
    /// cached, and the next lookup of the key fetches again.
    #[error("the fetch failed inside the gateway; the next request tries again")]
    FetchAborted,
}

/// An origin's budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OriginLimits {
    /// Calls in flight at once (at least 1).
    pub concurrency: usize,
    /// Calls started per second; 0 for no rate limit.
    pub per_second: f64,
    /// Calls that may start at once after a quiet spell (at least 1).
    pub burst: u32,
    /// The pause after a `RateLimited` answer that named none.
    pub default_retry_after: Duration,
    /// The longest pause any `RateLimited` answer imposes, whatever it named.
    pub max_retry_after: Duration,
}

impl Default for OriginLimits {
    fn default() -> Self {
        OriginLimits {
            concurrency: 16,
            per_second: 0.0,
            burst: 1,
            default_retry_after: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(300),
        }
    }
}

/// Counts of what reached an origin.
#[derive(Debug, Default)]
pub struct OriginStats {
    pub calls: AtomicU64,
    pub errors: AtomicU64,
    pub in_flight: AtomicUsize,
    /// The most calls that were ever in flight at once.
    pub most_in_flight: AtomicUsize,
}

/// One origin and its budget; see the module documentation.
pub struct Origin {
    limits: OriginLimits,
    permits: Semaphore,
    /// GCRA's theoretical arrival time of the next call.
    next_start: Mutex<Option<Instant>>,
    paused_until: Mutex<Option<Instant>>,
    pub stats: OriginStats,
}

impl Origin {
    pub fn new(limits: OriginLimits) -> Origin {
        Origin {
            permits: Semaphore::new(limits.concurrency.max(1)),
            limits,
            next_start: Mutex::new(None),
            paused_until: Mutex::new(None),
            stats: OriginStats::default(),
        }
    }

    pub fn limits(&self) -> OriginLimits {
        self.limits
    }

    /// Runs `call` once the budget allows it; a `RateLimited` answer pauses every later call
    /// for the time the origin named (at most `max_retry_after`).
    pub async fn call<T, F, Fut>(&self, call: F) -> Result<T, OriginError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, OriginError>>,
    {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| OriginError::Unreachable("origin closed".into()))?;
        self.wait_for_pause().await;
        self.wait_for_rate().await;
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let result = {
            let _in_flight = InFlight::enter(&self.stats);
            call().await
        };
        if let Err(error) = &result {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            if let OriginError::RateLimited { retry_after } = error {
                self.pause(*retry_after);
            }
        }
        result
    }

    /// Pauses every later call for what the origin asked (or the default), capped at
    /// `max_retry_after`. A pause never shortens one already running.
    fn pause(&self, asked: Option<Duration>) {
        let pause = asked
            .unwrap_or(self.limits.default_retry_after)
            .min(self.limits.max_retry_after);
        // Checked all the same: the cap is configuration, and a clock overflow is a panic.
        let Some(until) = Instant::now().checked_add(pause) else {
            return;
        };
        let mut paused = self.paused_until.lock();
        *paused = Some(paused.map_or(until, |p| p.max(until)));
    }

    async fn wait_for_pause(&self) {
        loop {
            let until = *self.paused_until.lock();
            match until {
                Some(until) if until > Instant::now() => tokio::time::sleep_until(until).await,
                _ => return,
            }
        }
    }

    /// GCRA: calls start at most every `1 / per_second`, `burst` of them at once after a quiet
    /// spell. The slot is reserved before sleeping, so waiters queue in order.
    async fn wait_for_rate(&self) {
        if self.limits.per_second <= 0.0 {
            return;
        }
        let interval = Duration::from_secs_f64(1.0 / self.limits.per_second);
        let tolerance = interval * self.limits.burst.max(1).saturating_sub(1);
        let start = {
            let now = Instant::now();
            let mut next = self.next_start.lock();
            let arrival = next.map_or(now, |t| t.max(now));
            *next = Some(arrival + interval);
            arrival.checked_sub(tolerance).unwrap_or(now).max(now)
        };
        tokio::time::sleep_until(start).await;
    }
}

/// One call counted in `in_flight` for as long as it runs, however it ends (an answer, an error,
/// a panic, or the caller dropping it): a guard, so the gauge cannot drift.
struct InFlight<'a>(&'a OriginStats);

impl<'a> InFlight<'a> {
    fn enter(stats: &'a OriginStats) -> InFlight<'a> {
        let now = stats.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        stats.most_in_flight.fetch_max(now, Ordering::Relaxed);
        InFlight(stats)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(start_paused = true)]
    async fn concurrency_is_capped() {
        let origin = Arc::new(Origin::new(OriginLimits {
            concurrency: 4,
            ..OriginLimits::default()
        }));
        let calls: Vec<_> = (0..100)
            .map(|_| {
                let origin = origin.clone();
                tokio::spawn(async move {
                    origin
                        .call(|| async {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            Ok::<_, OriginError>(())
                        })
                        .await
                })
            })
            .collect();
        for call in calls {
            call.await.expect("task").expect("call");
        }
        assert_eq!(origin.stats.calls.load(Ordering::Relaxed), 100);
        assert_eq!(origin.stats.most_in_flight.load(Ordering::Relaxed), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn rate_and_burst_are_kept() {
        let origin = Origin::new(OriginLimits {
            concurrency: 100,
            per_second: 10.0,
            burst: 5,
            ..OriginLimits::default()
        });
        let started = Instant::now();
        for _ in 0..25 {
            origin
                .call(|| async { Ok::<_, OriginError>(()) })
                .await
                .expect("call");
        }
        // 5 at once, then one every 100 ms: the 25th starts at 2.0 s.
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(2000), "{took:?}");
        assert!(took < Duration::from_millis(2100), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_pauses_every_call() {
        let origin = Origin::new(OriginLimits::default());
        let refused = origin
            .call(|| async {
                Err::<(), _>(OriginError::RateLimited {
                    retry_after: Some(Duration::from_secs(3)),
                })
            })
            .await;
        assert!(refused.is_err());
        let started = Instant::now();
        origin
            .call(|| async { Ok::<_, OriginError>(()) })
            .await
            .expect("call");
        assert!(started.elapsed() >= Duration::from_secs(3));
        assert_eq!(origin.stats.errors.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_huge_retry_after_pauses_for_the_cap_and_no_longer() {
        let origin = Origin::new(OriginLimits {
            max_retry_after: Duration::from_secs(300),
            ..OriginLimits::default()
        });
        // What `Retry-After: 18446744073709551615` parses to; added to a clock, it overflows.
        let refused = origin
            .call(|| async {
                Err::<(), _>(OriginError::RateLimited {
                    retry_after: Some(Duration::from_secs(u64::MAX)),
                })
            })
            .await;
        assert!(refused.is_err());
        let started = Instant::now();
        origin
            .call(|| async { Ok::<_, OriginError>(()) })
            .await
            .expect("call");
        assert_eq!(started.elapsed(), Duration::from_secs(300));
    }

    #[tokio::test]
    async fn a_call_that_panics_leaves_nothing_in_flight() {
        let origin = Arc::new(Origin::new(OriginLimits::default()));
        async fn panics() -> Result<(), OriginError> {
            panic!("a bug inside a fetch")
        }
        let task = tokio::spawn({
            let origin = origin.clone();
            async move { origin.call(panics).await }
        });
        assert!(task.await.expect_err("it panicked").is_panic());
        assert_eq!(origin.stats.in_flight.load(Ordering::Relaxed), 0);
        assert_eq!(origin.stats.most_in_flight.load(Ordering::Relaxed), 1);
    }
}
