//! Click counts, gathered in memory and written in one batch every `links.clicks_flush_ms`: a
//! redirect costs a map update, not a database write, and a click is durable within the flush
//! period. A batch that fails is merged back and written with the next one, so a database
//! outage delays counts without losing them (a crash loses at most one period's clicks).
//!
//! Links with a visit limit do not come here: each of their visits is a conditional write of
//! its own (`LinkStore::take_visit`), so the limit holds exactly, across nodes and restarts.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::metrics::LinkMetrics;
use crate::links::store::{ClickCount, LinkStore};
use crate::store::StoreError;

/// Clicks not yet written, by link code and day.
#[derive(Default)]
pub struct PendingClicks {
    counts: Mutex<HashMap<(Arc<str>, i32), i64>>,
    /// One flush at a time: a failed batch is merged back before the next one is taken.
    flushing: tokio::sync::Mutex<()>,
}

impl PendingClicks {
    pub fn count(&self, code: &Arc<str>, day: i32, metrics: &LinkMetrics) {
        let mut counts = self.counts.lock();
        let entry = counts.entry((code.clone(), day)).or_insert_with(|| {
            metrics.clicks_pending.inc();
            0
        });
        *entry += 1;
    }

    /// Writes every pending count in one batch; on failure they stay pending.
    pub async fn flush(
        &self,
        store: &dyn LinkStore,
        metrics: &LinkMetrics,
    ) -> Result<(), StoreError> {
        let _one_at_a_time = self.flushing.lock().await;
        let taken = std::mem::take(&mut *self.counts.lock());
        if taken.is_empty() {
            return Ok(());
        }
        let batch: Vec<ClickCount> = taken
            .iter()
            .map(|((code, day), count)| ClickCount {
                code: code.to_string(),
                day: *day,
                count: *count,
            })
            .collect();
        match store.add_clicks(batch).await {
            Ok(()) => {
                metrics.clicks_pending.sub(taken.len() as i64);
                metrics.click_flushes.with_label_values(&["ok"]).inc();
                Ok(())
            }
            Err(error) => {
                let mut counts = self.counts.lock();
                for (key, count) in taken {
                    match counts.entry(key) {
                        std::collections::hash_map::Entry::Occupied(mut e) => {
                            *e.get_mut() += count;
                            // Counted twice in the gauge: once before, once since.
                            metrics.clicks_pending.dec();
                        }
                        std::collections::hash_map::Entry::Vacant(e) => {
                            e.insert(count);
                        }
                    }
                }
                metrics.click_flushes.with_label_values(&["failed"]).inc();
                Err(error)
            }
        }
    }
}
