//! A cache that never stampedes its origins.
//!
//! Each key holds the last value an origin gave, when it was fetched and how long fetching took.
//! A lookup with a key's [`Policy`] answers from the cache and decides, by the entry's age:
//!
//! | age | answer | origin |
//! |---|---|---|
//! | fresh (`< ttl`) | the value (**hit**) | XFetch: refreshed early in the background, with a probability that grows as expiry nears and with the time a fetch takes (Vattani, Chierichetti, Lowenstein, VLDB 2015), so a hot key is refreshed before it expires, and never by two callers at once |
//! | stale, `< ttl + stale_while_revalidate` | the old value at once (**stale**) | one background refresh |
//! | older, or no entry | waits for the fetch (**miss**; **coalesced** for every caller who joined one already running) | one call per key however many wait (single-flight) |
//! | the fetch failed, entry `< ttl + stale_if_error` | the old value (**stale-if-error**) | — |
//!
//! Every fetch runs in a task of its own, so a caller that gives up does not cancel it for the
//! others. However that task ends — an answer, an error, a panic, or a runtime that drops it — a
//! guard takes the key's flight out of the table, so the next lookup fetches again: no key can be
//! left joined to a fetch that will never answer. Origins' budgets (`crate::origin`) apply inside
//! the fetch the caller passes.
//!
//! The cache is bounded in bytes: each entry weighs what the caller says its value holds in
//! memory, plus 64 bytes of bookkeeping; the least useful entries go first (quick_cache's
//! CLOCK-Pro). The store is split in [`SHARDS`] shards at most, each bounded alone, and an entry
//! heavier than about one shard's share is served but not kept: few shards keep that ceiling
//! high (a tenth of the bytes).
//!
//! Single-flight is per process: processes share no cache, so each fetches a key for itself.

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::origin::OriginError;

/// How one kind of value is kept; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    pub ttl: Duration,
    /// How long past `ttl` the old value is served while one refresh runs.
    pub stale_while_revalidate: Duration,
    /// How long past `ttl` the old value is served when the origin fails.
    pub stale_if_error: Duration,
    /// XFetch's β: 0 turns early refresh off, 1 is the paper's choice, more refreshes earlier.
    pub early_refresh_beta: f64,
}

/// Where a lookup's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Hit,
    /// Fetched for this caller.
    Miss,
    /// Fetched for another caller who asked first; this one waited for the same call.
    Coalesced,
    /// Past its time to live, served while a refresh runs.
    Stale,
    /// Past its time to live, served because the origin failed.
    StaleIfError,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Hit => "hit",
            Status::Miss => "miss",
            Status::Coalesced => "coalesced",
            Status::Stale => "stale",
            Status::StaleIfError => "stale_if_error",
        }
    }
}

/// A lookup's answer.
#[derive(Debug)]
pub struct Lookup<V> {
    pub value: Arc<V>,
    pub status: Status,
    /// How old the value is.
    pub age: Duration,
}

/// What a fetch gives: the value and what it weighs in the cache (the memory it holds, in
/// bytes: an estimate computed once, when it is fetched).
pub struct Fetched<V> {
    pub value: V,
    pub bytes: u64,
}

/// Counts of what the cache did.
#[derive(Debug, Default)]
pub struct CacheStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub coalesced: AtomicU64,
    pub stale: AtomicU64,
    pub stale_if_error: AtomicU64,
    /// Refreshes started before expiry (XFetch).
    pub early_refreshes: AtomicU64,
    /// Fetches started (foreground and background).
    pub fetches: AtomicU64,
    pub fetch_errors: AtomicU64,
}

struct Entry<V> {
    value: Arc<V>,
    fetched_at: Instant,
    /// How long the fetch took: XFetch's δ.
    took: Duration,
    bytes: u64,
}

type Flight<V> = Shared<BoxFuture<'static, Result<Arc<Entry<V>>, OriginError>>>;

/// The most shards the store is split in. Each shard is bounded alone and admits no entry heavier
/// than (nearly: 97 % of) its share of the bytes, so with eight the cache keeps any entry up to
/// a tenth of its bytes, on any machine (quick_cache would choose four shards per core); eight
/// read-write locks are plenty for lookups that each run a GraphQL query.
pub const SHARDS: usize = 8;

#[derive(Clone)]
struct Weigh;

impl<K, V> quick_cache::Weighter<K, Arc<Entry<V>>> for Weigh {
    fn weight(&self, _key: &K, entry: &Arc<Entry<V>>) -> u64 {
        // Never 0: quick_cache keeps zero-weight entries outside its bound.
        entry.bytes.max(1) + 64
    }
}

struct Inner<K, V> {
    store: quick_cache::sync::Cache<K, Arc<Entry<V>>, Weigh>,
    flights: Mutex<HashMap<K, Flight<V>>>,
    stats: CacheStats,
    /// A uniform draw in (0, 1] for XFetch; fixed in tests.
    random: Box<dyn Fn() -> f64 + Send + Sync>,
}

/// The cache; cheap to clone (one shared store).
pub struct Cache<K, V> {
    inner: Arc<Inner<K, V>>,
}

impl<K, V> Clone for Cache<K, V> {
    fn clone(&self) -> Self {
        Cache {
            inner: self.inner.clone(),
        }
    }
}

impl<K, V> Cache<K, V>
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
{
    /// A cache holding at most `max_bytes` (each entry's bytes plus 64 for its bookkeeping).
    pub fn new(max_bytes: u64) -> Cache<K, V> {
        Cache::with_random(max_bytes, || 1.0 - rand::random::<f64>())
    }

    /// As [`Cache::new`], with the draws XFetch uses (uniform in (0, 1]).
    pub fn with_random(
        max_bytes: u64,
        random: impl Fn() -> f64 + Send + Sync + 'static,
    ) -> Cache<K, V> {
        let estimated_items = usize::try_from(max_bytes / 1024)
            .unwrap_or(usize::MAX)
            .max(16);
        let options = quick_cache::OptionsBuilder::new()
            .estimated_items_capacity(estimated_items)
            .weight_capacity(max_bytes)
            .shards(SHARDS)
            .build()
            .expect("both capacities are set");
        let store = quick_cache::sync::Cache::with_options(
            options,
            Weigh,
            Default::default(),
            Default::default(),
        );
        Cache {
            inner: Arc::new(Inner {
                store,
                flights: Mutex::new(HashMap::new()),
                stats: CacheStats::default(),
                random: Box::new(random),
            }),
        }
    }

    pub fn stats(&self) -> &CacheStats {
        &self.inner.stats
    }

    /// Bytes held (entries' weights).
    pub fn bytes(&self) -> u64 {
        self.inner.store.weight()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.inner.store.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.store.is_empty()
    }

    /// The value of `key` under `policy`, calling `fetch` only when the module's table says so
    /// (and not at all when another caller's fetch of the key is already running).
    pub async fn get<F, Fut>(
        &self,
        key: K,
        policy: &Policy,
        fetch: F,
    ) -> Result<Lookup<V>, OriginError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Fetched<V>, OriginError>> + Send + 'static,
    {
        let stats = &self.inner.stats;
        let Some(entry) = self.inner.store.get(&key) else {
            return self.fetch_now(key, fetch).await;
        };
        let age = entry.fetched_at.elapsed();
        if age < policy.ttl {
            if self.refresh_early(&entry, age, policy) {
                // Runs in its own task; nobody waits for it here.
                let (_refresh, started) = self.start(key, fetch);
                if started {
                    stats.early_refreshes.fetch_add(1, Ordering::Relaxed);
                }
            }
            stats.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(lookup(&entry, Status::Hit));
        }
        if age < policy.ttl + policy.stale_while_revalidate {
            let _refresh = self.start(key, fetch);
            stats.stale.fetch_add(1, Ordering::Relaxed);
            return Ok(lookup(&entry, Status::Stale));
        }
        match self.fetch_now(key, fetch).await {
            Err(_) if age < policy.ttl + policy.stale_if_error => {
                stats.stale_if_error.fetch_add(1, Ordering::Relaxed);
                Ok(lookup(&entry, Status::StaleIfError))
            }
            other => other,
        }
    }

    /// XFetch: refresh now if `now - δ·β·ln(u) ≥ expiry`, u uniform in (0, 1].
    fn refresh_early(&self, entry: &Entry<V>, age: Duration, policy: &Policy) -> bool {
        if policy.early_refresh_beta <= 0.0 {
            return false;
        }
        let draw = (self.inner.random)().clamp(f64::MIN_POSITIVE, 1.0);
        let ahead = entry.took.as_secs_f64() * policy.early_refresh_beta * -draw.ln();
        age.as_secs_f64() + ahead >= policy.ttl.as_secs_f64()
    }

    /// Waits for the key's fetch, joining the running one if there is one.
    async fn fetch_now<F, Fut>(&self, key: K, fetch: F) -> Result<Lookup<V>, OriginError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Fetched<V>, OriginError>> + Send + 'static,
    {
        let (flight, led) = self.start(key, fetch);
        let entry = flight.await?;
        let status = if led {
            self.inner.stats.misses.fetch_add(1, Ordering::Relaxed);
            Status::Miss
        } else {
            self.inner.stats.coalesced.fetch_add(1, Ordering::Relaxed);
            Status::Coalesced
        };
        Ok(lookup(&entry, status))
    }

    /// The key's running fetch, or a new one running `fetch` in a task of its own; and whether
    /// this call started it.
    fn start<F, Fut>(&self, key: K, fetch: F) -> (Flight<V>, bool)
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Fetched<V>, OriginError>> + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let flight = {
            let mut flights = self.inner.flights.lock();
            if let Some(flight) = flights.get(&key) {
                return (flight.clone(), false);
            }
            // Whoever waits hears the fetch's result, or, if the task ends without sending one
            // (a panic, a dropped runtime), that it was aborted.
            let flight = async move { answered.await.unwrap_or(Err(OriginError::FetchAborted)) }
                .boxed()
                .shared();
            flights.insert(key.clone(), flight.clone());
            flight
        };
        self.inner.stats.fetches.fetch_add(1, Ordering::Relaxed);
        // Made before the task and moved into it, so it is dropped however the task ends, even
        // if it never runs; and outside the table's lock, which its drop takes.
        let landing = Landing {
            inner: self.inner.clone(),
            key: key.clone(),
            landed: false,
        };
        tokio::spawn(async move {
            let mut landing = landing;
            let started = Instant::now();
            let result = fetch().await.map(|fetched| {
                let entry = Arc::new(Entry {
                    value: Arc::new(fetched.value),
                    fetched_at: Instant::now(),
                    took: started.elapsed(),
                    bytes: fetched.bytes,
                });
                landing.inner.store.insert(key, entry.clone());
                entry
            });
            landing.landed = result.is_ok();
            // After the store has the new entry: a caller arriving now finds it, not a new fetch.
            drop(landing);
            // Nobody may be waiting any more (a background refresh); that is fine.
            let _ = answer.send(result);
        });
        (flight, true)
    }
}

/// Takes a key's flight out of the table when its fetch task ends, whatever the way: the one
/// place a flight leaves, so a fetch that panics cannot leave its key joined to it forever. A
/// fetch that ended without a value counts as a fetch error.
struct Landing<K: Eq + Hash, V> {
    inner: Arc<Inner<K, V>>,
    key: K,
    landed: bool,
}

impl<K: Eq + Hash, V> Drop for Landing<K, V> {
    fn drop(&mut self) {
        if !self.landed {
            self.inner
                .stats
                .fetch_errors
                .fetch_add(1, Ordering::Relaxed);
        }
        self.inner.flights.lock().remove(&self.key);
    }
}

fn lookup<V>(entry: &Entry<V>, status: Status) -> Lookup<V> {
    Lookup {
        value: entry.value.clone(),
        status,
        age: entry.fetched_at.elapsed(),
    }
}
