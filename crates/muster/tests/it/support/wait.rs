//! Waiting for something to happen, bounded: the one way tests wait on an event they cannot be
//! told of directly (a metric reaching a value, another node catching up). Never a fixed sleep.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How long [`eventually`] waits.
pub const EVENTUALLY: Duration = Duration::from_secs(10);

/// How often a wait looks again.
const EVERY: Duration = Duration::from_millis(20);

/// A bounded wait, for loops that poll with state of their own (a client borrowed mutably):
///
/// ```ignore
/// let mut wait = Wait::new("bob sees alice", EVENTUALLY);
/// let seen = loop {
///     let seen = presences(&mut bob).await;
///     if !seen.is_empty() { break seen; }
///     wait.tick().await;
/// };
/// ```
pub struct Wait {
    what: String,
    deadline: Instant,
}

impl Wait {
    pub fn new(what: impl Into<String>, within: Duration) -> Wait {
        Wait {
            what: what.into(),
            deadline: Instant::now() + within,
        }
    }

    /// Sleeps until the next look; the test fails, naming what it waited for, past the deadline.
    pub async fn tick(&mut self) {
        assert!(
            Instant::now() < self.deadline,
            "timed out waiting for {}",
            self.what
        );
        tokio::time::sleep(EVERY).await;
    }
}

/// Polls `condition` until it holds, for up to [`EVENTUALLY`]; the test fails naming `what` if it
/// never does.
pub async fn eventually<F, Fut>(what: &str, condition: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_within(what, EVENTUALLY, condition).await;
}

/// [`eventually`] with a bound of its own.
pub async fn eventually_within<F, Fut>(what: &str, within: Duration, condition: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let mut wait = Wait::new(what, within);
    while !condition().await {
        wait.tick().await;
    }
}
