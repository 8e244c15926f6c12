//! Paying arrivals: a player's creep that reaches its target pays its owner through the
//! economy's one write path (the wallet and its ledger), once per arrival.
//!
//! Shard threads hand arrivals to a task on the server's runtime; each payment is its own
//! ledger write keyed on the arrival (`world:<shard>:<creep>:<set off at>`), so a drive that a
//! restore replays (from a checkpoint older than the payment) is paid once, not twice. The
//! hand-over is unbounded on purpose: payments are never dropped, and only players' creeps
//! arrive at the rate players spawn them.

use std::sync::Arc;

use muster_world::shard::Arrival;
use tokio::sync::{mpsc, Semaphore};
use uuid::Uuid;

use super::metrics::WorldMetrics;
use crate::economy::change::Change;
use crate::economy::Economy;

/// Payments written at once.
const IN_FLIGHT: usize = 64;

struct Payout {
    user: Uuid,
    amount: i64,
    key: String,
}

/// Where shard threads send what their arrivals earn.
#[derive(Clone)]
pub struct Payouts {
    tx: mpsc::UnboundedSender<Payout>,
}

impl Payouts {
    pub fn pay(&self, shard: u32, user: Uuid, arrival: &Arrival) {
        let _ = self.tx.send(Payout {
            user,
            amount: i64::from(arrival.reward),
            key: format!("world:{shard}:{}:{}", arrival.creep, arrival.start_ms),
        });
    }
}

/// Starts the paying task (on the current runtime).
pub fn start(economy: Arc<Economy>, currency: String, metrics: Arc<WorldMetrics>) -> Payouts {
    let (tx, mut rx) = mpsc::unbounded_channel::<Payout>();
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    tokio::spawn(async move {
        while let Some(payout) = rx.recv().await {
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let (economy, currency, metrics) = (economy.clone(), currency.clone(), metrics.clone());
            tokio::spawn(async move {
                let change = Change::new(payout.user, "world_arrival")
                    .grant(&currency, payout.amount)
                    .idempotency_key(&payout.key);
                match economy.apply(change).await {
                    Ok(_) => metrics.payouts.with_label_values(&["paid"]).inc(),
                    Err(error) => {
                        tracing::warn!(%error, user = %payout.user, "world: an arrival could not be paid");
                        metrics.payouts.with_label_values(&["failed"]).inc();
                    }
                }
                drop(permit);
            });
        }
    });
    Payouts { tx }
}
