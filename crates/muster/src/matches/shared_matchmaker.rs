//! The matchmaker of a cluster on PostgreSQL. Every node writes its players' tickets to the
//! shared database (a ticket is acknowledged once it is durable); one node at a time — the
//! holder of the `matchmaker` lease ([`crate::matches::store::MatchmakerStore`]) — runs the passes, with
//! the same grouping as a single node ([`super::matchmaker::Pool`]), and tells each matched
//! player through its node. The lease lasts `max(cluster.failure_timeout_ms, 3 ×
//! matchmaker.interval_ms)` and each pass renews it; when its holder dies another node takes it
//! after it expires, with a higher epoch. A pass is one transaction fenced by that epoch: a
//! former holder that has not noticed yet changes nothing, so no ticket is matched twice.
//!
//! Tickets leave with their session (its node deletes them), with their node (the others delete
//! a dead node's tickets), and with a node's previous run (deleted when it starts again).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use muster_proto::realtime::UserPresence;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::MatchError;
use super::matchmaker::{announce, PartyMember, Pool, Ticket};
use super::query::Query;
use super::Matches;
use crate::cluster::bus::Bus;
use crate::cluster::Recipient;
use crate::matches::config::MatchmakerConfig;
use crate::matches::store::{MatchmakerStore, StoredTicket, TicketAdded};
use crate::store::StoreError;

/// The lease's name in `cluster_leases`.
const LEASE: &str = "matchmaker";

/// A ticket's fields beside its ids, stored as JSON.
#[derive(Debug, Serialize, Deserialize)]
struct Body {
    presence: UserPresence,
    user_id: Uuid,
    query: String,
    min_count: u32,
    max_count: u32,
    strings: HashMap<String, String>,
    numbers: HashMap<String, f64>,
    /// The node of the ticket's player, when not the node that stored it (a party's leader).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    node: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    party_id: String,
    /// A party's other members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    party: Vec<MemberBody>,
}

/// A party member on its leader's ticket, and the node its session is on.
#[derive(Debug, Serialize, Deserialize)]
struct MemberBody {
    presence: UserPresence,
    user_id: Uuid,
    node: String,
}

/// This node's side of the cluster's matchmaker.
pub struct SharedTickets {
    store: Arc<dyn MatchmakerStore>,
    bus: Bus,
    /// How long the lease lasts without a pass renewing it.
    lease_ms: i64,
}

fn unavailable(error: StoreError) -> MatchError {
    tracing::warn!(%error, "matchmaker: the shared ticket store failed");
    MatchError::Rejected("Matchmaker is unavailable; try again.".into())
}

impl SharedTickets {
    pub fn new(
        store: Arc<dyn MatchmakerStore>,
        bus: Bus,
        failure_timeout_ms: u64,
        config: &MatchmakerConfig,
    ) -> SharedTickets {
        let lease_ms = failure_timeout_ms.max(3 * config.interval_ms) as i64;
        SharedTickets {
            store,
            bus,
            lease_ms,
        }
    }

    /// Stores a validated ticket; acknowledged once durable.
    pub async fn add(
        &self,
        ticket: &Ticket,
        query: String,
        config: &MatchmakerConfig,
    ) -> Result<(), MatchError> {
        let body = Body {
            presence: ticket.presence.clone(),
            user_id: ticket
                .recipient
                .as_ref()
                .map_or(Uuid::nil(), Recipient::user_id),
            query,
            min_count: ticket.min_count,
            max_count: ticket.max_count,
            strings: ticket.strings.clone(),
            numbers: ticket.numbers.clone(),
            node: ticket
                .recipient
                .as_ref()
                .and_then(Recipient::node)
                .map(str::to_owned),
            party_id: ticket.party_id.clone(),
            party: ticket
                .party
                .iter()
                .filter_map(|m| {
                    let recipient = m.recipient.as_ref()?;
                    Some(MemberBody {
                        presence: m.presence.clone(),
                        user_id: recipient.user_id(),
                        node: recipient.node().unwrap_or(self.bus.node()).to_owned(),
                    })
                })
                .collect(),
        };
        let stored = StoredTicket {
            id: ticket.id,
            session_id: ticket.session_id,
            user_id: body.user_id,
            node: self.bus.node().to_string(),
            incarnation: self.bus.incarnation() as i64,
            created_ms: crate::base::clock::now_ms(),
            body: serde_json::to_string(&body).unwrap_or_default(),
        };
        let added = self
            .store
            .add_ticket(
                stored,
                config.max_tickets_per_session as i64,
                config.max_tickets_per_user as i64,
            )
            .await
            .map_err(unavailable)?;
        match added {
            TicketAdded::Added => Ok(()),
            TicketAdded::SessionFull => Err(MatchError::BadInput(format!(
                "At most {} matchmaker tickets per connection.",
                config.max_tickets_per_session
            ))),
            TicketAdded::UserFull => Err(MatchError::BadInput(format!(
                "At most {} matchmaker tickets per user.",
                config.max_tickets_per_user
            ))),
        }
    }

    pub async fn remove(&self, session: Uuid, ticket: Uuid) -> Result<(), MatchError> {
        if self
            .store
            .remove_ticket(session, ticket)
            .await
            .map_err(unavailable)?
        {
            Ok(())
        } else {
            Err(MatchError::BadInput("Matchmaker ticket not found.".into()))
        }
    }

    /// Drops the tickets of a closed session (in the background: a closing socket does not wait).
    pub fn session_closed(&self, session: Uuid) {
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(error) = store.remove_session_tickets(session).await {
                tracing::warn!(%error, "matchmaker: a closed session's tickets stay until its node leaves");
            }
        });
    }

    /// Drops the tickets of a node that left the cluster.
    pub fn node_left(&self, node: &str) {
        let store = self.store.clone();
        let node = node.to_string();
        tokio::spawn(async move {
            if let Err(error) = store.remove_node_tickets(&node, 0).await {
                tracing::warn!(%error, node, "matchmaker: could not drop a departed node's tickets");
            }
        });
    }

    /// A stored ticket as the pass groups it; `None` when it cannot be read.
    fn ticket(&self, stored: &StoredTicket, interval_ms: u64, now_ms: i64) -> Option<Ticket> {
        let body: Body = serde_json::from_str(&stored.body).ok()?;
        let query = Query::parse(&body.query).ok()?;
        let node = body.node.as_deref().unwrap_or(&stored.node);
        let recipient = Recipient::remote(body.presence.clone(), body.user_id, node, &self.bus)?;
        let party = body
            .party
            .into_iter()
            .map(|m| PartyMember {
                recipient: Recipient::remote(m.presence.clone(), m.user_id, &m.node, &self.bus),
                presence: m.presence,
            })
            .collect();
        let waited = (now_ms - stored.created_ms).max(0) as u64 / interval_ms.max(1);
        Some(Ticket {
            id: stored.id,
            recipient: Some(recipient),
            presence: body.presence,
            session_id: stored.session_id,
            party_id: body.party_id,
            party,
            query,
            min_count: body.min_count,
            max_count: body.max_count,
            strings: body.strings,
            numbers: body.numbers,
            intervals: waited.min(u64::from(u32::MAX)) as u32,
        })
    }
}

/// The passes: this node takes the lease when it is free, and runs a pass every
/// `matchmaker.interval_ms` while it holds it.
pub async fn run(matches: Arc<Matches>) {
    let Some(shared) = matches.matchmaker.shared() else {
        return;
    };
    let node = shared.bus.node().to_string();
    let incarnation = shared.bus.incarnation() as i64;
    match shared.store.remove_node_tickets(&node, incarnation).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            n,
            "matchmaker: dropped this node's tickets from a previous run"
        ),
        Err(error) => tracing::warn!(%error, "matchmaker: could not drop a previous run's tickets"),
    }
    let config = matches.matchmaker_config.clone();
    let metrics = matches.metrics.clone();
    let mut every = tokio::time::interval(Duration::from_millis(config.interval_ms));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut epoch: Option<i64> = None;
    loop {
        tokio::select! {
            () = matches.shutdown.cancelled() => return,
            _ = every.tick() => {}
        }
        if epoch.is_none() {
            match shared.store.take_lease(LEASE, &node, shared.lease_ms).await {
                Ok(Some(taken)) => {
                    tracing::info!(
                        epoch = taken,
                        "matchmaker: this node runs the cluster's passes"
                    );
                    metrics.matchmaker_epoch.set(taken);
                    epoch = Some(taken);
                }
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(%error, "matchmaker: could not take the lease");
                    continue;
                }
            }
        }
        let Some(held) = epoch else { continue };
        let started = Instant::now();
        let pick = |stored: Vec<StoredTicket>| pick_groups(shared, &config, stored);
        match shared
            .store
            .take_groups(LEASE, &node, held, shared.lease_ms, &pick)
            .await
        {
            Ok(Some(groups)) => {
                metrics
                    .matchmaker_pass
                    .observe(started.elapsed().as_secs_f64());
                let now = crate::base::clock::now_ms();
                for group in groups {
                    let tickets: Vec<Ticket> = group
                        .iter()
                        .filter_map(|t| shared.ticket(t, config.interval_ms, now))
                        .collect();
                    announce(&matches, tickets);
                }
            }
            Ok(None) => {
                tracing::info!(epoch = held, "matchmaker: the lease passed to another node");
                metrics.matchmaker_epoch.set(0);
                epoch = None;
            }
            Err(error) => tracing::warn!(%error, "matchmaker: a pass failed; nothing was matched"),
        }
    }
}

/// The groups one pass forms out of every waiting ticket.
fn pick_groups(
    shared: &SharedTickets,
    config: &MatchmakerConfig,
    stored: Vec<StoredTicket>,
) -> Vec<Vec<StoredTicket>> {
    let now = crate::base::clock::now_ms();
    let mut pool = Pool::default();
    let mut by_id = HashMap::with_capacity(stored.len());
    for stored in stored {
        match shared.ticket(&stored, config.interval_ms, now) {
            Some(ticket) => {
                // Past max_tickets the rest wait for a later pass.
                if pool.add(ticket, config).is_ok() {
                    by_id.insert(stored.id, stored);
                }
            }
            None => {
                tracing::warn!(ticket = %stored.id, "matchmaker: an unreadable ticket is skipped")
            }
        }
    }
    pool.pass(config)
        .into_iter()
        .map(|group| group.iter().filter_map(|t| by_id.remove(&t.id)).collect())
        .collect()
}
