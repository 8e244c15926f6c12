//! The console across a cluster: which nodes are alive (told by the cluster's membership) and
//! each node's status history, asked for over NATS. Every node answers on
//! `<prefix>.console.status.<node>`; a history too large for one message (NATS takes 1 MB) comes
//! in parts, each naming the series to start the next from.

use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::history::{History, WindowQuery};
use crate::cluster::bus::Bus;
use crate::cluster::membership::{Departure, MembershipObserver};

/// How long a node is waited for.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// JSON one part of an answer carries at most (under NATS's 1 MB).
const PART_BYTES: usize = 600_000;
/// Departures remembered for the operations page.
const DEPARTURES_KEPT: usize = 50;

/// What a node is asked: a window, from its `from`th series.
#[derive(Debug, Serialize, Deserialize)]
struct Ask {
    query: WindowQuery,
    from: usize,
}

impl crate::cluster::protocol::Message for Ask {
    const KIND: &'static str = "console.window_ask";
}

/// A part of a node's window, and where the next part starts (none: the last part).
#[derive(Debug, Serialize, Deserialize)]
struct WindowPart {
    window: Value,
    next: Option<usize>,
}

impl crate::cluster::protocol::Message for WindowPart {
    const KIND: &'static str = "console.window_part";
}

/// The nodes this one knows to be alive, and the latest departures.
#[derive(Default)]
pub struct Nodes {
    /// Live peers and when this node first heard of each (Unix ms).
    peers: Mutex<BTreeMap<String, i64>>,
    /// (node, why, when) newest last.
    departures: Mutex<VecDeque<(String, &'static str, i64)>>,
}

impl MembershipObserver for Nodes {
    fn node_joined(&self, node: &str) {
        self.peers
            .lock()
            .insert(node.to_owned(), crate::base::clock::now_ms());
    }

    fn node_left(&self, node: &str, why: Departure) {
        self.peers.lock().remove(node);
        let why = match why {
            Departure::Goodbye => "goodbye",
            Departure::Silent => "silent",
            Departure::Restarted => "restarted",
        };
        let mut departures = self.departures.lock();
        if departures.len() == DEPARTURES_KEPT {
            departures.pop_front();
        }
        departures.push_back((node.to_owned(), why, crate::base::clock::now_ms()));
    }
}

impl Nodes {
    /// The live peers, by name.
    pub fn peers(&self) -> Vec<String> {
        self.peers.lock().keys().cloned().collect()
    }

    /// The peers with when they were first heard of, and the latest departures (newest first).
    pub fn report(&self) -> Value {
        let peers: Vec<Value> = self
            .peers
            .lock()
            .iter()
            .map(|(node, since)| json!({"node": node, "seen_since": since}))
            .collect();
        let departures: Vec<Value> = self
            .departures
            .lock()
            .iter()
            .rev()
            .map(|(node, why, at)| json!({"node": node, "why": why, "time": at}))
            .collect();
        json!({"peers": peers, "departures": departures})
    }
}

/// This node's part of the console in a cluster.
pub struct ClusterStatus {
    pub bus: Bus,
    pub nodes: Arc<Nodes>,
}

fn topic(node: &str) -> String {
    format!("console.status.{node}")
}

impl ClusterStatus {
    /// Answers the other nodes' questions about this node's history until the bus closes.
    pub async fn serve(&self, history: Arc<History>) -> anyhow::Result<()> {
        let mut asks = self.bus.subscribe(&topic(self.bus.node())).await?;
        let bus = self.bus.clone();
        tokio::spawn(async move {
            while let Some(message) = asks.next().await {
                let Some(reply) = message.reply else { continue };
                let Ok(ask) = crate::cluster::protocol::decode::<Ask>(&message.payload) else {
                    continue;
                };
                let (window, next) = history.window_part(ask.query, ask.from, PART_BYTES);
                let part = WindowPart {
                    window: serde_json::to_value(window).unwrap_or_default(),
                    next,
                };
                bus.answer(reply, &part).await;
            }
        });
        Ok(())
    }

    /// Node `node`'s window, asked for part by part.
    pub async fn ask(&self, node: &str, query: WindowQuery) -> anyhow::Result<Value> {
        let mut window: Option<Value> = None;
        let mut from = 0;
        loop {
            let ask = Ask { query, from };
            let part: WindowPart = self.bus.ask(&topic(node), &ask, ASK_TIMEOUT).await?;
            let next = part.next;
            let part_window = part.window;
            match &mut window {
                None => window = Some(part_window),
                Some(w) => {
                    if let (Some(all), Some(more)) =
                        (w["series"].as_array_mut(), part_window["series"].as_array())
                    {
                        all.extend(more.iter().cloned());
                    }
                }
            }
            match next {
                Some(n) if n > from => from = n,
                _ => return Ok(window.unwrap_or(Value::Null)),
            }
        }
    }
}
