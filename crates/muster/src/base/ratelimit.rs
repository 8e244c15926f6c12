//! Per-client-IP rate limits (token buckets from `governor`). Keys are pruned by the server's
//! housekeeping task so the map stays bounded by the number of recently active IPs.

use std::net::IpAddr;
use std::num::NonZeroU32;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// A per-IP limit; `None` inside when the configured rate is 0 (disabled).
pub struct IpLimit(Option<DefaultKeyedRateLimiter<IpAddr>>);

impl IpLimit {
    pub fn new(per_second: u32, burst: u32) -> IpLimit {
        IpLimit(NonZeroU32::new(per_second).map(|rate| {
            let burst = NonZeroU32::new(burst.max(per_second)).unwrap_or(rate);
            RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        }))
    }

    /// True when `ip` may go ahead now.
    pub fn allow(&self, ip: IpAddr) -> bool {
        self.0
            .as_ref()
            .is_none_or(|limiter| limiter.check_key(&ip).is_ok())
    }

    /// Forgets IPs whose bucket is full again.
    pub fn prune(&self) {
        if let Some(limiter) = &self.0 {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refusal_per_ip() {
        let limit = IpLimit::new(1, 3);
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        assert!((0..3).all(|_| limit.allow(a)));
        assert!(!limit.allow(a));
        assert!(limit.allow(b), "another IP has its own bucket");
    }

    #[test]
    fn zero_disables() {
        let limit = IpLimit::new(0, 0);
        assert!((0..10_000).all(|_| limit.allow([10, 0, 0, 1].into())));
    }
}
