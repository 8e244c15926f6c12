//! The cache's guarantees, on tokio's paused clock (sleeps advance it at once, so a 500 ms
//! origin costs no real time).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::sleep;

use super::{Cache, Fetched, Policy, Status};
use crate::origin::{Origin, OriginError, OriginLimits};

const ORIGIN_DELAY: Duration = Duration::from_millis(500);

fn policy(ttl_s: u64) -> Policy {
    Policy {
        ttl: Duration::from_secs(ttl_s),
        stale_while_revalidate: Duration::ZERO,
        stale_if_error: Duration::ZERO,
        early_refresh_beta: 0.0,
    }
}

/// A fake origin: answers `version-N` after its delay (N counts its calls), or fails while
/// `failing` is set.
#[derive(Clone, Default)]
struct FakeOrigin {
    calls: Arc<AtomicU64>,
    failing: Arc<std::sync::atomic::AtomicBool>,
}

impl FakeOrigin {
    fn fetch(
        &self,
    ) -> impl FnOnce()
        -> futures_util::future::BoxFuture<'static, Result<Fetched<String>, OriginError>>
           + Send
           + 'static {
        let this = self.clone();
        move || {
            Box::pin(async move {
                let n = this.calls.fetch_add(1, Ordering::SeqCst) + 1;
                sleep(ORIGIN_DELAY).await;
                if this.failing.load(Ordering::SeqCst) {
                    return Err(OriginError::Status(502));
                }
                let value = format!("version-{n}");
                Ok(Fetched {
                    bytes: value.len() as u64,
                    value,
                })
            })
        }
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

#[tokio::test(start_paused = true)]
async fn one_origin_call_for_a_thousand_concurrent_misses() {
    let cache: Cache<&str, String> = Cache::new(1 << 20);
    let origin = FakeOrigin::default();
    let lookups = (0..1000).map(|_| {
        let (cache, origin) = (cache.clone(), origin.clone());
        tokio::spawn(async move { cache.get("catalogue", &policy(60), origin.fetch()).await })
    });
    let lookups: Vec<_> = lookups.collect();
    let mut statuses = Vec::new();
    for lookup in lookups {
        let lookup = lookup.await.expect("task").expect("value");
        assert_eq!(*lookup.value, "version-1");
        statuses.push(lookup.status);
    }
    assert_eq!(origin.calls(), 1);
    assert_eq!(statuses.iter().filter(|s| **s == Status::Miss).count(), 1);
    assert_eq!(
        statuses.iter().filter(|s| **s == Status::Coalesced).count(),
        999
    );
    assert_eq!(cache.stats().coalesced.load(Ordering::Relaxed), 999);
    // Fresh afterwards: a hit, no call.
    let hit = cache
        .get("catalogue", &policy(60), origin.fetch())
        .await
        .expect("hit");
    assert_eq!(hit.status, Status::Hit);
    assert_eq!(origin.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn one_origin_call_when_a_thousand_ask_for_an_expired_key() {
    // No stale window: an expired key must be fetched again before anyone is answered.
    let cache: Cache<&str, String> = Cache::new(1 << 20);
    let origin = FakeOrigin::default();
    cache
        .get("odds", &policy(60), origin.fetch())
        .await
        .expect("first");
    sleep(Duration::from_secs(61)).await;
    let lookups: Vec<_> = (0..1000)
        .map(|_| {
            let (cache, origin) = (cache.clone(), origin.clone());
            tokio::spawn(async move { cache.get("odds", &policy(60), origin.fetch()).await })
        })
        .collect();
    for lookup in lookups {
        let lookup = lookup.await.expect("task").expect("value");
        assert_eq!(*lookup.value, "version-2");
        assert!(matches!(lookup.status, Status::Miss | Status::Coalesced));
    }
    assert_eq!(
        origin.calls(),
        2,
        "one call for the first fetch, one for the expired key"
    );
}

#[tokio::test(start_paused = true)]
async fn stale_while_revalidate_serves_the_old_value_during_one_refresh() {
    let cache: Cache<&str, String> = Cache::new(1 << 20);
    let origin = FakeOrigin::default();
    let swr = Policy {
        stale_while_revalidate: Duration::from_secs(30),
        ..policy(60)
    };
    cache
        .get("news", &swr, origin.fetch())
        .await
        .expect("first");
    sleep(Duration::from_secs(61)).await;
    // Expired: 100 callers get the old value at once, and one refresh starts.
    let started = tokio::time::Instant::now();
    for _ in 0..100 {
        let lookup = cache
            .get("news", &swr, origin.fetch())
            .await
            .expect("stale");
        assert_eq!(lookup.status, Status::Stale);
        assert_eq!(*lookup.value, "version-1");
    }
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "no caller waited for the origin"
    );
    tokio::task::yield_now().await;
    assert_eq!(origin.calls(), 2);
    sleep(ORIGIN_DELAY + Duration::from_millis(1)).await;
    let fresh = cache
        .get("news", &swr, origin.fetch())
        .await
        .expect("fresh");
    assert_eq!(fresh.status, Status::Hit);
    assert_eq!(*fresh.value, "version-2");
    assert_eq!(origin.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn xfetch_refreshes_a_hot_key_before_it_expires() {
    // u = 0.01: -ln u = 4.6, so with β = 1 and a 500 ms fetch, early refresh starts 2.3 s
    // before expiry, and not before.
    let cache: Cache<&str, String> = Cache::with_random(1 << 20, || 0.01);
    let origin = FakeOrigin::default();
    let early = Policy {
        early_refresh_beta: 1.0,
        ..policy(60)
    };
    cache
        .get("event", &early, origin.fetch())
        .await
        .expect("first");
    sleep(Duration::from_secs(57)).await;
    let hit = cache
        .get("event", &early, origin.fetch())
        .await
        .expect("hit");
    assert_eq!(hit.status, Status::Hit);
    tokio::task::yield_now().await;
    assert_eq!(origin.calls(), 1, "57 s + 2.3 s < 60 s: too early");
    sleep(Duration::from_millis(800)).await;
    let hit = cache
        .get("event", &early, origin.fetch())
        .await
        .expect("hit");
    assert_eq!(hit.status, Status::Hit);
    assert_eq!(*hit.value, "version-1");
    tokio::task::yield_now().await;
    assert_eq!(origin.calls(), 2, "57.8 s + 2.3 s ≥ 60 s: refreshed early");
    // Later callers before expiry join that refresh instead of starting their own.
    for _ in 0..10 {
        cache
            .get("event", &early, origin.fetch())
            .await
            .expect("hit");
    }
    tokio::task::yield_now().await;
    assert_eq!(origin.calls(), 2);
    sleep(ORIGIN_DELAY + Duration::from_millis(1)).await;
    // At 58.3 s the new value is there: the key never expired for its callers.
    let renewed = cache
        .get("event", &early, origin.fetch())
        .await
        .expect("hit");
    assert_eq!(renewed.status, Status::Hit);
    assert_eq!(*renewed.value, "version-2");
    assert_eq!(cache.stats().early_refreshes.load(Ordering::Relaxed), 1);
}

#[tokio::test(start_paused = true)]
async fn stale_if_error_serves_the_old_value_for_its_window_then_fails() {
    let cache: Cache<&str, String> = Cache::new(1 << 20);
    let origin = FakeOrigin::default();
    let sie = Policy {
        stale_if_error: Duration::from_secs(300),
        ..policy(60)
    };
    cache
        .get("feed", &sie, origin.fetch())
        .await
        .expect("first");
    origin.failing.store(true, Ordering::SeqCst);
    sleep(Duration::from_secs(61)).await;
    let served = cache
        .get("feed", &sie, origin.fetch())
        .await
        .expect("stale");
    assert_eq!(served.status, Status::StaleIfError);
    assert_eq!(*served.value, "version-1");
    sleep(Duration::from_secs(300)).await;
    let failed = cache.get("feed", &sie, origin.fetch()).await;
    assert_eq!(failed.err(), Some(OriginError::Status(502)));
    // A failed fetch caches nothing: once the origin is back, the next lookup fetches.
    origin.failing.store(false, Ordering::SeqCst);
    let back = cache.get("feed", &sie, origin.fetch()).await.expect("back");
    assert_eq!(back.status, Status::Miss);
    assert_eq!(origin.calls(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_mass_expiry_stays_within_the_origins_budget() {
    // 10,000 keys, all cached at once and expiring in the same second, then all asked for: the
    // origin sees one call per key and never more than its 8 at once; no caller gets an error.
    let cache: Cache<u32, String> = Cache::new(64 << 20);
    let origin = Arc::new(Origin::new(OriginLimits {
        concurrency: 8,
        ..OriginLimits::default()
    }));
    let swr = Policy {
        stale_while_revalidate: Duration::from_secs(3600),
        ..policy(60)
    };
    let calls = Arc::new(AtomicU64::new(0));
    let fetch = |key: u32| {
        let (origin, calls) = (origin.clone(), calls.clone());
        move || async move {
            origin
                .call(|| async {
                    calls.fetch_add(1, Ordering::Relaxed);
                    sleep(Duration::from_millis(20)).await;
                    Ok(Fetched {
                        value: format!("item-{key}"),
                        bytes: 16,
                    })
                })
                .await
        }
    };
    let seed = (0..10_000u32).map(|key| {
        let cache = cache.clone();
        let fetch = fetch(key);
        tokio::spawn(async move { cache.get(key, &swr, fetch).await })
    });
    let seed: Vec<_> = seed.collect();
    for lookup in seed {
        lookup.await.expect("task").expect("seeded");
    }
    assert_eq!(calls.load(Ordering::Relaxed), 10_000);
    sleep(Duration::from_secs(61)).await;
    let lookups = (0..10_000u32).map(|key| {
        let cache = cache.clone();
        let fetch = fetch(key);
        tokio::spawn(async move { cache.get(key, &swr, fetch).await })
    });
    let lookups: Vec<_> = lookups.collect();
    for lookup in lookups {
        let lookup = lookup.await.expect("task").expect("no error to a client");
        assert_eq!(lookup.status, Status::Stale);
    }
    // Let the background refreshes drain: 10,000 × 20 ms over 8 at a time = 25 s.
    sleep(Duration::from_secs(30)).await;
    assert_eq!(calls.load(Ordering::Relaxed), 20_000, "one refresh per key");
    assert!(origin.stats.most_in_flight.load(Ordering::Relaxed) <= 8);
    let fresh = cache.get(42, &swr, fetch(42)).await.expect("fresh");
    assert_eq!(fresh.status, Status::Hit);
}

#[tokio::test(start_paused = true)]
async fn the_cache_stays_within_its_bytes() {
    let cache: Cache<u32, String> = Cache::new(100 * 1024);
    for key in 0..1000u32 {
        cache
            .get(key, &policy(60), move || async move {
                Ok(Fetched {
                    value: "x".repeat(1000),
                    bytes: 1000,
                })
            })
            .await
            .expect("value");
    }
    assert!(cache.bytes() <= 100 * 1024, "{} bytes", cache.bytes());
    assert!(
        cache.len() < 1000 && cache.len() > 50,
        "{} entries",
        cache.len()
    );
}

/// A fetch with a bug: it panics once its origin has answered.
async fn panicking_fetch() -> Result<Fetched<String>, OriginError> {
    sleep(ORIGIN_DELAY).await;
    panic!("a bug inside the fetch (this panic is the test's)");
}

#[tokio::test(start_paused = true)]
async fn a_fetch_that_panics_leaves_the_key_usable() {
    let cache: Cache<&str, String> = Cache::new(1 << 20);
    // Ten callers wait on the one fetch, which panics: each hears so, none waits forever.
    let waiters: Vec<_> = (0..10)
        .map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move { cache.get("prices", &policy(60), panicking_fetch).await })
        })
        .collect();
    for waiter in waiters {
        let answer = waiter.await.expect("the caller's task does not panic");
        assert_eq!(answer.err(), Some(OriginError::FetchAborted));
    }
    assert_eq!(cache.stats().fetches.load(Ordering::Relaxed), 1);
    assert_eq!(cache.stats().fetch_errors.load(Ordering::Relaxed), 1);
    // The key is not left joined to the dead fetch: the next lookup fetches again.
    let origin = FakeOrigin::default();
    let back = cache
        .get("prices", &policy(60), origin.fetch())
        .await
        .expect("fetched again");
    assert_eq!(back.status, Status::Miss);
    assert_eq!(*back.value, "version-1");
    assert_eq!(origin.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_background_refresh_that_panics_is_started_again() {
    let cache: Cache<&str, String> = Cache::new(1 << 20);
    let origin = FakeOrigin::default();
    let swr = Policy {
        stale_while_revalidate: Duration::from_secs(30),
        ..policy(60)
    };
    cache
        .get("scores", &swr, origin.fetch())
        .await
        .expect("first");
    sleep(Duration::from_secs(61)).await;
    let stale = cache
        .get("scores", &swr, panicking_fetch)
        .await
        .expect("stale");
    assert_eq!(stale.status, Status::Stale);
    // Let the refresh run and panic.
    sleep(ORIGIN_DELAY + Duration::from_millis(1)).await;
    assert_eq!(cache.stats().fetch_errors.load(Ordering::Relaxed), 1);
    // Still stale, and this lookup starts a new refresh instead of joining the dead one.
    let stale = cache
        .get("scores", &swr, origin.fetch())
        .await
        .expect("stale");
    assert_eq!(stale.status, Status::Stale);
    tokio::task::yield_now().await;
    assert_eq!(origin.calls(), 2);
    sleep(ORIGIN_DELAY + Duration::from_millis(1)).await;
    let fresh = cache
        .get("scores", &swr, origin.fetch())
        .await
        .expect("fresh");
    assert_eq!(
        (fresh.status, fresh.value.as_str()),
        (Status::Hit, "version-2")
    );
}

#[tokio::test(start_paused = true)]
async fn an_entry_of_a_tenth_of_the_cache_is_kept() {
    // The store is split in shards, each bounded alone; an entry heavier than (nearly) one
    // shard's share would be fetched and never kept. With a shard per 2 cores or more, as
    // quick_cache would choose, a tenth is too heavy on a machine of 3 cores or more.
    let cache: Cache<u32, String> = Cache::new(64 << 20);
    let heavy = (64 << 20) / 10;
    cache
        .get(1, &policy(60), move || async move {
            Ok(Fetched {
                value: "heavy".to_owned(),
                bytes: heavy,
            })
        })
        .await
        .expect("value");
    assert_eq!(cache.len(), 1);
    assert!(cache.bytes() >= heavy);
}
