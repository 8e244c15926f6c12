//! Keyed rate limits (token buckets from `governor`): per client IP, per account. Keys are
//! pruned by the server's housekeeping task so each map stays bounded by the number of recently
//! active keys.

use std::hash::Hash;
use std::net::IpAddr;
use std::num::NonZeroU32;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// A limit per key; `None` inside when the configured rate is 0 (disabled).
pub struct KeyedLimit<K: Hash + Eq + Clone>(Option<DefaultKeyedRateLimiter<K>>);

/// A limit per client IP.
pub type IpLimit = KeyedLimit<IpAddr>;

impl<K: Hash + Eq + Clone> KeyedLimit<K> {
    /// `per_second` refilled each second, up to `burst` at once (at least `per_second`).
    pub fn new(per_second: u32, burst: u32) -> KeyedLimit<K> {
        KeyedLimit(NonZeroU32::new(per_second).map(|rate| {
            let burst = NonZeroU32::new(burst.max(per_second)).unwrap_or(rate);
            RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        }))
    }

    /// `count` per minute, all of which may be used at once.
    pub fn per_minute(count: u32) -> KeyedLimit<K> {
        KeyedLimit(NonZeroU32::new(count).map(|count| RateLimiter::keyed(Quota::per_minute(count))))
    }

    /// True when `key` may go ahead now.
    pub fn allow(&self, key: K) -> bool {
        self.0
            .as_ref()
            .is_none_or(|limiter| limiter.check_key(&key).is_ok())
    }

    /// Forgets keys whose bucket is full again.
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
    fn per_minute_allows_its_count_at_once_then_refuses() {
        let limit: KeyedLimit<u32> = KeyedLimit::per_minute(3);
        assert!((0..3).all(|_| limit.allow(7)));
        assert!(!limit.allow(7));
        assert!(limit.allow(8), "another key has its own bucket");
    }

    #[test]
    fn zero_disables() {
        let limit = IpLimit::new(0, 0);
        assert!((0..10_000).all(|_| limit.allow([10, 0, 0, 1].into())));
    }
}
