//! Which nodes of the cluster are alive.
//!
//! Every node publishes a heartbeat on `<prefix>.heartbeat` every `cluster.heartbeat_ms`, and a
//! goodbye on `<prefix>.goodbye` when it shuts down cleanly. Each node keeps the others' last
//! heartbeat: a node that says goodbye is gone at once, one not heard from for
//! `cluster.failure_timeout_ms` (killed, cut off) is taken for dead. Observers (the cluster's
//! router) are told of every node that joins or leaves so that they drop what a dead node held;
//! `muster_cluster_nodes` counts the live ones (this one included).
//!
//! A heartbeat carries the node's incarnation (when it started): a node restarted under the
//! same name is a new incarnation, so the others forget the old one's state; two running nodes
//! with one name are a configuration error, logged by both.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use prometheus::{IntCounter, IntGauge, Registry};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::bus::Bus;
use crate::cluster::config::ClusterConfig;

/// What a heartbeat says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Heartbeat {
    node: String,
    /// Unix ms at which this node started: its incarnation.
    incarnation: u64,
    /// Where others and players reach it.
    advertise: String,
}

impl crate::cluster::protocol::Message for Heartbeat {
    const KIND: &'static str = "cluster.heartbeat";
}

/// Why a node left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    /// It said goodbye (a clean shutdown).
    Goodbye,
    /// Not heard from within the failure timeout.
    Silent,
    /// It came back as a new incarnation; the old one is gone.
    Restarted,
}

/// Told of nodes joining and leaving (never of this node itself).
pub trait MembershipObserver: Send + Sync {
    fn node_joined(&self, _node: &str) {}
    fn node_left(&self, node: &str, why: Departure);
}

/// Another node as last heard.
struct Peer {
    incarnation: u64,
    last_seen: Instant,
}

struct Metrics {
    nodes: IntGauge,
    failures: IntCounter,
}

/// This node's membership of the cluster. Owned by its one task (started by [`join`]) until
/// shutdown, so nothing in it is shared or locked.
struct Membership {
    name: String,
    incarnation: u64,
    advertise: String,
    bus: Bus,
    failure_timeout: Duration,
    peers: HashMap<String, Peer>,
    observers: Vec<Arc<dyn MembershipObserver>>,
    metrics: Metrics,
}

/// Joins the cluster: heartbeats on `bus` from now until `shutdown` fires (then a goodbye);
/// `advertise` is where this node is reached; `observers` are told of every node that joins or
/// leaves from the first heartbeat on.
pub async fn join(
    config: &ClusterConfig,
    bus: Bus,
    advertise: String,
    observers: Vec<Arc<dyn MembershipObserver>>,
    registry: &Registry,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let heartbeats = bus.subscribe("heartbeat").await?;
    let goodbyes = bus.subscribe("goodbye").await?;
    let metrics = Metrics {
        nodes: crate::base::metrics::register(
            registry,
            IntGauge::new(
                "cluster_nodes",
                "Live nodes of the cluster, this one included.",
            ),
        ),
        failures: crate::base::metrics::register(
            registry,
            IntCounter::new(
                "cluster_node_failures_total",
                "Nodes taken for dead after the failure timeout.",
            ),
        ),
    };
    metrics.nodes.set(1);
    let membership = Membership {
        name: bus.node().to_string(),
        incarnation: bus.incarnation(),
        advertise,
        bus,
        failure_timeout: Duration::from_millis(config.failure_timeout_ms),
        peers: HashMap::new(),
        observers,
        metrics,
    };
    membership.publish_heartbeat().await;
    tracing::info!(node = %membership.name, "cluster: joined over NATS");
    let every = Duration::from_millis(config.heartbeat_ms);
    tokio::spawn(membership.run(heartbeats, goodbyes, every, shutdown));
    Ok(())
}

impl Membership {
    fn heartbeat(&self) -> Heartbeat {
        Heartbeat {
            node: self.name.clone(),
            incarnation: self.incarnation,
            advertise: self.advertise.clone(),
        }
    }

    async fn publish_heartbeat(&self) {
        // A lost beat (NATS away) is made up by the next; the client reconnects by itself.
        self.bus.send("heartbeat", &self.heartbeat()).await;
    }

    async fn run(
        mut self,
        mut heartbeats: async_nats::Subscriber,
        mut goodbyes: async_nats::Subscriber,
        every: Duration,
        shutdown: CancellationToken,
    ) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    self.publish_heartbeat().await;
                    self.expire(Instant::now());
                }
                Some(message) = heartbeats.next() => {
                    match crate::cluster::protocol::decode::<Heartbeat>(&message.payload) {
                        Ok(beat) => self.heard(beat, Instant::now()),
                        Err(e) => tracing::warn!("cluster: unreadable heartbeat: {e}"),
                    }
                }
                Some(message) = goodbyes.next() => {
                    if let Ok(beat) = crate::cluster::protocol::decode::<Heartbeat>(&message.payload) {
                        self.left(&beat, Departure::Goodbye);
                    }
                }
                _ = shutdown.cancelled() => break,
            }
        }
        {
            self.bus.send("goodbye", &self.heartbeat()).await;
            self.bus.flush().await;
        }
    }

    /// A heartbeat arrived.
    fn heard(&mut self, beat: Heartbeat, now: Instant) {
        if beat.node == self.name {
            if beat.incarnation != self.incarnation {
                tracing::error!(
                    node = %beat.node,
                    "cluster: another running node has this node's name; give every node its own cluster.node_name"
                );
            }
            return;
        }
        let peer = Peer {
            incarnation: beat.incarnation,
            last_seen: now,
        };
        let joined = match self.peers.insert(beat.node.clone(), peer) {
            None => true,
            Some(old) if old.incarnation != beat.incarnation => {
                self.notify_left(&beat.node, Departure::Restarted);
                true
            }
            Some(_) => false,
        };
        if joined {
            tracing::info!(node = %beat.node, "cluster: node joined");
            self.update_gauge();
            for observer in &self.observers {
                observer.node_joined(&beat.node);
            }
        }
    }

    /// A goodbye arrived.
    fn left(&mut self, beat: &Heartbeat, why: Departure) {
        let same = self
            .peers
            .get(&beat.node)
            .is_some_and(|p| p.incarnation == beat.incarnation);
        if same {
            self.peers.remove(&beat.node);
            self.notify_left(&beat.node, why);
        }
    }

    /// Takes nodes silent for longer than the failure timeout for dead.
    fn expire(&mut self, now: Instant) {
        let timeout = self.failure_timeout;
        let dead: Vec<String> = self
            .peers
            .iter()
            .filter(|(_, p)| now.duration_since(p.last_seen) > timeout)
            .map(|(name, _)| name.clone())
            .collect();
        for name in dead {
            self.peers.remove(&name);
            self.metrics.failures.inc();
            self.notify_left(&name, Departure::Silent);
        }
    }

    fn notify_left(&self, node: &str, why: Departure) {
        tracing::warn!(node, ?why, "cluster: node left");
        self.update_gauge();
        for observer in &self.observers {
            observer.node_left(node, why);
        }
    }

    fn update_gauge(&self) {
        self.metrics.nodes.set(self.peers.len() as i64 + 1);
    }
}
