//! Paying the world's credits: what players' arriving creeps earn, and refunds of actions that
//! were paid for but not applied. Every credit goes through the economy's one write path (the
//! wallet and its ledger), keyed, so that a credit written twice is paid once.
//!
//! Credits are never dropped:
//! - each is kept here until the database has taken it; a write that fails for a passing reason
//!   (the database away) is retried with a growing pause, one that never can (an account that
//!   no longer exists, a balance at its ceiling) is counted and let go;
//! - an arrival's credit is first appended to its shard's action log (see `super::runner`), so
//!   a crash before it is paid loses nothing: the restore's replay hands it here again; and the
//!   credits still waiting when a checkpoint is taken are appended again to the log segment that
//!   follows it, since the segments before it are deleted.
//!
//! Bounded: past [`Payouts::bound`] credits waiting, the shard refuses new spawns (whose
//! arrivals would add more) until the backlog shrinks; what is already on the road still pays.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use muster_world::shard::Arrival;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use uuid::Uuid;

use super::metrics::WorldMetrics;
use crate::economy::change::Change;
use crate::economy::{Economy, EconomyError};

/// Credits written at once.
const IN_FLIGHT: usize = 64;

/// The longest pause between two tries of a failing credit.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// One credit: `amount` of the world's currency to `user`, written once under `key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credit {
    pub user: Uuid,
    pub amount: i64,
    /// The ledger's idempotency key (`world:<shard>:<creep>:<set off at>` for an arrival).
    pub key: String,
    /// The ledger row's reason (`world_arrival`, `world_refund`).
    pub reason: String,
    /// The shard it comes from (whose checkpoints must carry it while it waits).
    pub shard: u32,
}

impl Credit {
    /// What an arrival earns its owner.
    pub fn arrival(shard: u32, user: Uuid, arrival: &Arrival) -> Credit {
        Credit {
            user,
            amount: i64::from(arrival.reward),
            key: format!("world:{shard}:{}:{}", arrival.creep, arrival.start_ms),
            reason: "world_arrival".into(),
            shard,
        }
    }
}

#[derive(Default)]
struct Queue {
    /// Credits waiting, by key (a credit handed in twice waits once).
    waiting: HashMap<String, Credit>,
    /// Keys in the order they are to be tried.
    order: VecDeque<String>,
}

/// The credits waiting to be written, and the task writing them.
pub struct Payouts {
    queue: Mutex<Queue>,
    wake: Notify,
    bound: usize,
    economy: Arc<Economy>,
    currency: String,
    metrics: Arc<WorldMetrics>,
}

impl Payouts {
    /// Starts the paying task (on the current runtime).
    pub fn start(
        economy: Arc<Economy>,
        currency: String,
        bound: usize,
        metrics: Arc<WorldMetrics>,
    ) -> Arc<Payouts> {
        let payouts = Arc::new(Payouts {
            queue: Mutex::new(Queue::default()),
            wake: Notify::new(),
            bound,
            economy,
            currency,
            metrics,
        });
        tokio::spawn(payouts.clone().run());
        payouts
    }

    /// Hands `credit` over to be written (once, whatever happens).
    pub fn pay(&self, credit: Credit) {
        {
            let mut queue = self.queue.lock();
            if queue.waiting.contains_key(&credit.key) {
                return;
            }
            queue.order.push_back(credit.key.clone());
            queue.waiting.insert(credit.key.clone(), credit);
            self.metrics.payouts_waiting.set(queue.waiting.len() as i64);
        }
        self.wake.notify_one();
    }

    /// Credits waiting.
    pub fn backlog(&self) -> usize {
        self.queue.lock().waiting.len()
    }

    /// The backlog past which spawns are refused.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// The credits of shard `shard` still waiting (for its next log segment).
    pub fn waiting_of(&self, shard: u32) -> Vec<Credit> {
        let queue = self.queue.lock();
        queue
            .order
            .iter()
            .filter_map(|key| queue.waiting.get(key))
            .filter(|c| c.shard == shard)
            .cloned()
            .collect()
    }

    async fn run(self: Arc<Payouts>) {
        let mut backoff = Duration::from_millis(50);
        loop {
            let batch: Vec<Credit> = {
                let queue = self.queue.lock();
                queue
                    .order
                    .iter()
                    .take(IN_FLIGHT)
                    .filter_map(|key| queue.waiting.get(key).cloned())
                    .collect()
            };
            if batch.is_empty() {
                self.wake.notified().await;
                continue;
            }
            let results = futures_util::future::join_all(batch.iter().map(|c| self.write(c))).await;
            let mut failed = false;
            {
                let mut queue = self.queue.lock();
                for (credit, done) in batch.iter().zip(results) {
                    if done {
                        queue.waiting.remove(&credit.key);
                    } else {
                        failed = true;
                    }
                }
                let Queue { waiting, order } = &mut *queue;
                order.retain(|key| waiting.contains_key(key));
                self.metrics.payouts_waiting.set(waiting.len() as i64);
            }
            if failed {
                // The database is away (or slow): wait before trying again, longer each time.
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = self.wake.notified() => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            } else {
                backoff = Duration::from_millis(50);
            }
        }
    }

    /// Writes one credit: true when it is done with (paid, or refused for good).
    async fn write(&self, credit: &Credit) -> bool {
        let change = Change::new(credit.user, &credit.reason)
            .grant(&self.currency, credit.amount)
            .idempotency_key(&credit.key);
        match self.economy.apply(change).await {
            Ok(_) => {
                self.metrics.payouts.with_label_values(&["paid"]).inc();
                true
            }
            Err(EconomyError::Unavailable(_) | EconomyError::Internal) => {
                self.metrics.payouts.with_label_values(&["retried"]).inc();
                false
            }
            Err(error) => {
                // It could never be written (the account is gone, the balance at its ceiling).
                tracing::warn!(%error, user = %credit.user, key = %credit.key,
                    "world: a credit cannot be paid and is let go");
                self.metrics.payouts.with_label_values(&["refused"]).inc();
                true
            }
        }
    }
}
