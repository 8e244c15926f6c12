//! The hot-code cache: recently visited links in memory, bounded in entries
//! (`links.cache_entries`, evicting the least useful first — `quick_cache`'s CLOCK-Pro) and in
//! age (`links.cache_ttl_ms`, so a link disabled through another node stops here too).

use std::sync::Arc;
use std::time::{Duration, Instant};

use quick_cache::sync::Cache;

use crate::links::store::LinkRecord;

/// A link as the redirect path needs it.
pub struct HotLink {
    /// The code, shared with the click counts.
    pub code: Arc<str>,
    pub record: LinkRecord,
    loaded: Instant,
}

pub struct HotLinks {
    cache: Cache<String, Arc<HotLink>>,
    ttl: Duration,
}

impl HotLinks {
    pub fn new(entries: usize, ttl: Duration) -> HotLinks {
        HotLinks {
            cache: Cache::new(entries),
            ttl,
        }
    }

    /// The cached link, unless it is older than the TTL.
    pub fn get(&self, code: &str) -> Option<Arc<HotLink>> {
        self.cache
            .get(code)
            .filter(|hot| hot.loaded.elapsed() < self.ttl)
    }

    pub fn insert(&self, record: LinkRecord) -> Arc<HotLink> {
        let hot = Arc::new(HotLink {
            code: Arc::from(record.code.as_str()),
            record,
            loaded: Instant::now(),
        });
        self.cache.insert(hot.record.code.clone(), hot.clone());
        hot
    }

    pub fn forget(&self, code: &str) {
        self.cache.remove(code);
    }
}
