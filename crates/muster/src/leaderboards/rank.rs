//! Ranks in memory: for each leaderboard period, its records in an order-statistic B-tree
//! (`wabi_tree`), so a rank is found and kept in O(log n) however many records there are.
//!
//! A period is loaded from the database the first time it is asked about, under its lock, and
//! then kept by every write this node makes. Each entry remembers the `num_score` it came with:
//! of two updates of one record racing here, the one the database applied later (the higher
//! count) wins, whatever order they arrive in.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Mutex;
use uuid::Uuid;
use wabi_tree::OSBTreeSet;

use crate::leaderboards::store::LeaderboardStore;
use crate::store::StoreError;

/// A record's place: ascending (score, subscore, owner) order; a descending leaderboard ranks
/// from the other end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    score: i64,
    subscore: i64,
    owner: Uuid,
}

#[derive(Default)]
struct Period {
    ordered: OSBTreeSet<Entry>,
    /// Each owner's entry and the `num_score` it came with.
    owners: HashMap<Uuid, (Entry, i32)>,
}

impl Period {
    fn put(&mut self, owner: Uuid, score: i64, subscore: i64, num_score: i32) {
        if let Some((old, seen)) = self.owners.get(&owner).copied() {
            if seen > num_score {
                return;
            }
            self.ordered.remove(&old);
        }
        let entry = Entry {
            score,
            subscore,
            owner,
        };
        self.ordered.insert(entry);
        self.owners.insert(owner, (entry, num_score));
    }

    fn rank(&self, owner: &Uuid, descending: bool) -> Option<i64> {
        let (entry, _) = self.owners.get(owner)?;
        let index = self.ordered.rank_of(entry)? as i64;
        let len = self.ordered.len() as i64;
        Some(if descending { len - index } else { index + 1 })
    }
}

type PeriodKey = (String, i64);

/// Every loaded period's ranks.
#[derive(Default)]
pub struct Ranks {
    periods: std::sync::Mutex<HashMap<PeriodKey, Arc<Mutex<Option<Period>>>>>,
}

impl Ranks {
    fn slot(&self, leaderboard_id: &str, expiry_time: i64) -> Arc<Mutex<Option<Period>>> {
        let mut periods = self
            .periods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        periods
            .entry((leaderboard_id.to_string(), expiry_time))
            .or_default()
            .clone()
    }

    /// Runs `f` on the period's ranks, loading them first if this node has not yet.
    pub async fn with<T>(
        &self,
        store: &dyn LeaderboardStore,
        leaderboard_id: &str,
        expiry_time: i64,
        f: impl FnOnce(&mut PeriodRanks<'_>) -> T,
    ) -> Result<T, StoreError> {
        let slot = self.slot(leaderboard_id, expiry_time);
        let mut guard = slot.lock().await;
        if guard.is_none() {
            let mut period = Period::default();
            for (owner, score, subscore, num_score) in store
                .period_scores(leaderboard_id.to_string(), expiry_time)
                .await?
            {
                period.put(owner, score, subscore, num_score);
            }
            *guard = Some(period);
        }
        let period = guard.get_or_insert_with(Period::default);
        Ok(f(&mut PeriodRanks { period }))
    }

    /// Runs `f` on the period's ranks only if this node has loaded them (one it has not will
    /// read the database when first asked, and find there what `f` would have applied).
    pub async fn if_loaded(
        &self,
        leaderboard_id: &str,
        expiry_time: i64,
        f: impl FnOnce(&mut PeriodRanks<'_>),
    ) -> Result<(), StoreError> {
        let slot = {
            let periods = self
                .periods
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            periods
                .get(&(leaderboard_id.to_string(), expiry_time))
                .cloned()
        };
        if let Some(slot) = slot {
            let mut guard = slot.lock().await;
            if let Some(period) = guard.as_mut() {
                f(&mut PeriodRanks { period });
            }
        }
        Ok(())
    }

    /// Removes `owner` from every period this node has loaded (the account was deleted).
    pub async fn remove_everywhere(&self, owner: &Uuid) {
        let slots: Vec<_> = self
            .periods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for slot in slots {
            if let Some(period) = slot.lock().await.as_mut() {
                PeriodRanks { period }.remove(owner);
            }
        }
    }

    /// Forgets every period of a leaderboard (it was deleted).
    pub fn forget(&self, leaderboard_id: &str) {
        self.periods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(id, _), _| id != leaderboard_id);
    }
}

/// A loaded period's ranks, while its lock is held.
pub struct PeriodRanks<'a> {
    period: &'a mut Period,
}

impl PeriodRanks<'_> {
    /// Records the owner's score (as the database answered it) and answers their rank.
    pub fn put(
        &mut self,
        owner: Uuid,
        score: i64,
        subscore: i64,
        num_score: i32,
        descending: bool,
    ) -> i64 {
        self.period.put(owner, score, subscore, num_score);
        self.rank(&owner, descending)
    }

    pub fn remove(&mut self, owner: &Uuid) {
        if let Some((entry, _)) = self.period.owners.remove(owner) {
            self.period.ordered.remove(&entry);
        }
    }

    /// The owner's rank (1 is the best), 0 when they have no record.
    pub fn rank(&self, owner: &Uuid, descending: bool) -> i64 {
        self.period.rank(owner, descending).unwrap_or(0)
    }

    /// The owner, score and subscore of the record at `rank` (1 is the best), if the period
    /// holds that many.
    pub fn at_rank(&self, rank: i64, descending: bool) -> Option<(Uuid, i64, i64)> {
        let len = self.period.ordered.len() as i64;
        if rank < 1 || rank > len {
            return None;
        }
        let index = if descending { len - rank } else { rank - 1 };
        let entry = self.period.ordered.get_by_rank(index as usize)?;
        Some((entry.owner, entry.score, entry.subscore))
    }

    /// How many records the period holds.
    pub fn count(&self) -> i64 {
        self.period.ordered.len() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_scores_both_ways_and_the_latest_update_wins() {
        let mut period = Period::default();
        let ids: Vec<Uuid> = (0..5u128).map(Uuid::from_u128).collect();
        for (i, id) in ids.iter().enumerate() {
            period.put(*id, 10 * i as i64, 0, 1);
        }
        // Descending: the highest score is first.
        assert_eq!(period.rank(&ids[4], true), Some(1));
        assert_eq!(period.rank(&ids[0], true), Some(5));
        // Ascending: the lowest is.
        assert_eq!(period.rank(&ids[0], false), Some(1));
        // A tie on score and subscore is broken by owner, descending from the top.
        period.put(ids[0], 40, 0, 2);
        assert_eq!(period.rank(&ids[4], true), Some(1));
        assert_eq!(period.rank(&ids[0], true), Some(2));
        // An older update arriving late changes nothing.
        period.put(ids[0], 0, 0, 1);
        assert_eq!(period.rank(&ids[0], true), Some(2));
        assert_eq!(period.ordered.len(), 5);
        // And back from a rank to its record, both ways.
        let ranks = PeriodRanks {
            period: &mut period,
        };
        assert_eq!(ranks.at_rank(1, true), Some((ids[4], 40, 0)));
        assert_eq!(ranks.at_rank(2, true), Some((ids[0], 40, 0)));
        assert_eq!(ranks.at_rank(5, true), Some((ids[1], 10, 0)));
        assert_eq!(ranks.at_rank(1, false), Some((ids[1], 10, 0)));
        assert_eq!(ranks.at_rank(5, false), Some((ids[4], 40, 0)));
        assert_eq!(ranks.at_rank(0, true), None);
        assert_eq!(ranks.at_rank(6, false), None);
    }
}
