//! Which nodes of the cluster are alive.
//!
//! Every node publishes a heartbeat on `<prefix>.heartbeat` every `cluster.heartbeat_ms`, and a
//! goodbye on `<prefix>.goodbye` when it shuts down cleanly. Each node keeps the others' last
//! heartbeat: a node that says goodbye is gone at once, one not heard from for
//! `cluster.failure_timeout_ms` (killed, cut off) is taken for dead. Observers (the presence
//! directory, the matchmaker lease) are told of every node that joins or leaves so that they
//! drop what a dead node held; `muster_cluster_nodes` counts the live ones (this one included).
//!
//! A heartbeat carries the node's incarnation (when it started): a node restarted under the
//! same name is a new incarnation, so the others forget the old one's state; two running nodes
//! with one name are a configuration error, logged by both.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use prometheus::{IntCounter, IntGauge, Registry};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::bus::Bus;
use crate::base::config::ClusterConfig;

/// What a heartbeat says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Heartbeat {
    node: String,
    /// Unix ms at which this node started: its incarnation.
    incarnation: u64,
    /// Where others and players reach it.
    advertise: String,
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
#[derive(Debug, Clone)]
pub struct Peer {
    pub incarnation: u64,
    pub advertise: String,
    last_seen: Instant,
}

struct Metrics {
    nodes: IntGauge,
    failures: IntCounter,
}

struct Inner {
    name: String,
    incarnation: u64,
    advertise: String,
    bus: Bus,
    failure_timeout: Duration,
    peers: Mutex<HashMap<String, Peer>>,
    observers: Mutex<Vec<Arc<dyn MembershipObserver>>>,
    metrics: Metrics,
}

/// This node's membership of the cluster; cheap to clone.
#[derive(Clone)]
pub struct Membership {
    inner: Arc<Inner>,
}

impl Membership {
    /// Starts heartbeating on `bus`; `advertise` is where this node is reached; `observers` are
    /// told of every node that joins or leaves from the first heartbeat on. The heartbeat stops,
    /// with a goodbye, when `shutdown` fires.
    pub async fn join(
        config: &ClusterConfig,
        bus: Bus,
        advertise: String,
        observers: Vec<Arc<dyn MembershipObserver>>,
        registry: &Registry,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Membership> {
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
            inner: Arc::new(Inner {
                name: bus.node().to_string(),
                incarnation: bus.incarnation(),
                advertise,
                bus,
                failure_timeout: Duration::from_millis(config.failure_timeout_ms),
                peers: Mutex::new(HashMap::new()),
                observers: Mutex::new(observers),
                metrics,
            }),
        };
        membership.publish_heartbeat().await;
        let every = Duration::from_millis(config.heartbeat_ms);
        tokio::spawn(
            membership
                .clone()
                .run(heartbeats, goodbyes, every, shutdown),
        );
        tracing::info!(node = %membership.inner.name, "cluster: joined over NATS");
        Ok(membership)
    }

    /// This node's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The live nodes' names, this one included, sorted.
    pub fn alive(&self) -> Vec<String> {
        let mut names: Vec<String> = self.peers().keys().cloned().collect();
        names.push(self.inner.name.clone());
        names.sort();
        names
    }

    /// The other live nodes as last heard.
    pub fn peers(&self) -> HashMap<String, Peer> {
        self.inner
            .peers
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// Adds an observer of nodes joining and leaving.
    pub fn observe(&self, observer: Arc<dyn MembershipObserver>) {
        if let Ok(mut observers) = self.inner.observers.lock() {
            observers.push(observer);
        }
    }

    fn heartbeat(&self) -> Heartbeat {
        Heartbeat {
            node: self.inner.name.clone(),
            incarnation: self.inner.incarnation,
            advertise: self.inner.advertise.clone(),
        }
    }

    async fn publish_heartbeat(&self) {
        if let Ok(body) = serde_json::to_vec(&self.heartbeat()) {
            // A lost beat (NATS away) is made up by the next; the client reconnects by itself.
            self.inner.bus.publish("heartbeat", body).await;
        }
    }

    async fn run(
        self,
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
                    match serde_json::from_slice::<Heartbeat>(&message.payload) {
                        Ok(beat) => self.heard(beat, Instant::now()),
                        Err(e) => tracing::warn!("cluster: unreadable heartbeat: {e}"),
                    }
                }
                Some(message) = goodbyes.next() => {
                    if let Ok(beat) = serde_json::from_slice::<Heartbeat>(&message.payload) {
                        self.left(&beat, Departure::Goodbye);
                    }
                }
                _ = shutdown.cancelled() => break,
            }
        }
        if let Ok(body) = serde_json::to_vec(&self.heartbeat()) {
            self.inner.bus.publish("goodbye", body).await;
            self.inner.bus.flush().await;
        }
    }

    /// A heartbeat arrived.
    fn heard(&self, beat: Heartbeat, now: Instant) {
        if beat.node == self.inner.name {
            if beat.incarnation != self.inner.incarnation {
                tracing::error!(
                    node = %beat.node,
                    "cluster: another running node has this node's name; give every node its own cluster.node_name"
                );
            }
            return;
        }
        let mut restarted = false;
        let joined = {
            let Ok(mut peers) = self.inner.peers.lock() else {
                return;
            };
            let peer = Peer {
                incarnation: beat.incarnation,
                advertise: beat.advertise.clone(),
                last_seen: now,
            };
            match peers.insert(beat.node.clone(), peer) {
                None => true,
                Some(old) if old.incarnation != beat.incarnation => {
                    restarted = true;
                    true
                }
                Some(_) => false,
            }
        };
        if restarted {
            self.notify_left(&beat.node, Departure::Restarted);
        }
        if joined {
            tracing::info!(node = %beat.node, "cluster: node joined");
            self.update_gauge();
            for observer in self.observers() {
                observer.node_joined(&beat.node);
            }
        }
    }

    /// A goodbye arrived.
    fn left(&self, beat: &Heartbeat, why: Departure) {
        let removed = self.inner.peers.lock().ok().is_some_and(|mut peers| {
            let same = peers
                .get(&beat.node)
                .is_some_and(|p| p.incarnation == beat.incarnation);
            same && peers.remove(&beat.node).is_some()
        });
        if removed {
            self.notify_left(&beat.node, why);
        }
    }

    /// Takes nodes silent for longer than the failure timeout for dead.
    fn expire(&self, now: Instant) {
        let dead: Vec<String> = {
            let Ok(mut peers) = self.inner.peers.lock() else {
                return;
            };
            let dead: Vec<String> = peers
                .iter()
                .filter(|(_, p)| now.duration_since(p.last_seen) > self.inner.failure_timeout)
                .map(|(name, _)| name.clone())
                .collect();
            for name in &dead {
                peers.remove(name);
            }
            dead
        };
        for name in dead {
            self.inner.metrics.failures.inc();
            self.notify_left(&name, Departure::Silent);
        }
    }

    fn notify_left(&self, node: &str, why: Departure) {
        tracing::warn!(node, ?why, "cluster: node left");
        self.update_gauge();
        for observer in self.observers() {
            observer.node_left(node, why);
        }
    }

    fn update_gauge(&self) {
        let peers = self.inner.peers.lock().map(|p| p.len()).unwrap_or(0);
        self.inner.metrics.nodes.set(peers as i64 + 1);
    }

    fn observers(&self) -> Vec<Arc<dyn MembershipObserver>> {
        self.inner
            .observers
            .lock()
            .map(|o| o.clone())
            .unwrap_or_default()
    }
}
