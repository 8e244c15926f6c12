//! The router of a cluster: the one-node router for this node's sessions and channel members,
//! plus channel membership and messages shared with the other nodes over the [`Bus`].
//!
//! - **Membership replica.** Every node keeps, for each channel, the members that are on other
//!   nodes (their presence and whether they joined hidden). A node publishes each join and leave
//!   of its own members on the `chan.presence` topic, numbered per node; a node that first hears
//!   of another (or misses a number) asks it for a snapshot of its members (`chan.snapshot.<node>`)
//!   and applies the numbered changes that come after it. A node that leaves the cluster (goodbye
//!   or failure timeout) has its members removed, and every member left behind is told they left.
//! - **Messages.** A channel message is delivered to this node's members, and published once on
//!   the channel's subject (`chan.m.<hex of the id>`), which only nodes with members in the
//!   channel subscribe to.
//! - **Join answers** list this node's members and the replica's, so a player sees everyone in
//!   the channel wherever they are connected.
//!
//! - **Sessions.** The same numbered changes carry every session opening and ending, so each
//!   node knows which users are online where: `is_online` sees users on any node, and a
//!   delivery to a session or a user on another node goes to that node's inbox
//!   (`node.<name>.deliver`), which hands it to the session or the user's sessions there.
//!
//! Matches and the matchmaker are still this node's only (docs/cluster.md).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use muster_proto::realtime::{decode_protobuf, UserPresence};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::bus::Bus;
use super::local::LocalRouter;
use super::membership::{Departure, MembershipObserver};
use super::protocol::{decode, decode_borrowed, encode, Message};
use super::{JoinLimits, Router};
use crate::session::channels::{Channel, ChannelRefusal, Delivery, JoinFlags, Joined};
use crate::session::fanout::Encoded;
use crate::session::registry::SessionObserver;
use crate::session::Session;

const PRESENCE: &str = "chan.presence";
/// How long a snapshot request waits for its answer, and how many times it is made.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(2);
const SNAPSHOT_ATTEMPTS: u32 = 5;

/// One change of a node's own channel members.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Change {
    Join {
        channel: String,
        presence: UserPresence,
        hidden: bool,
    },
    Leave {
        channel: String,
        session_id: String,
    },
    /// A session opened on the node.
    SessionUp {
        session_id: Uuid,
        user_id: Uuid,
    },
    /// A session of the node ended.
    SessionDown {
        session_id: Uuid,
    },
}

/// A change as published: numbered per node and incarnation.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Numbered {
    node: String,
    incarnation: u64,
    seq: u64,
    change: Change,
}

/// A node's channel members and sessions at the moment its change number was `seq`.
#[derive(Debug, Serialize, Deserialize)]
struct Snapshot {
    incarnation: u64,
    seq: u64,
    /// Channel members (`Join`) and sessions (`SessionUp`): one page of them.
    members: Vec<Change>,
    /// The key to ask the next page after; none on the last page.
    #[serde(default)]
    next: Option<String>,
}

impl Message for Numbered {
    const KIND: &'static str = "cluster.change";
}

impl Message for Snapshot {
    const KIND: &'static str = "cluster.snapshot";
}

/// A snapshot page asked for: the key the page starts after (empty: the first).
#[derive(Debug, Serialize, Deserialize)]
struct SnapshotAsk {
    after: String,
}

impl Message for SnapshotAsk {
    const KIND: &'static str = "cluster.snapshot_ask";
}

/// A channel's message for its members on other nodes: the sending node (which skips its own)
/// and the realtime envelope, encoded once as protobuf.
#[derive(Debug, Serialize, Deserialize)]
struct ChannelMessage<B> {
    node: String,
    envelope: B,
}

impl<B> Message for ChannelMessage<B> {
    const KIND: &'static str = "cluster.channel_message";
}

/// A message for one of a node's sessions, or for a user's sessions there (its inbox,
/// `node.<name>.deliver`).
#[derive(Debug, Serialize, Deserialize)]
struct ToNode<B> {
    to: Addressee,
    envelope: B,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Addressee {
    Session(Uuid),
    User(Uuid),
    /// The session's socket is to be closed (the envelope is empty).
    EndSession(Uuid),
}

impl<B> Message for ToNode<B> {
    const KIND: &'static str = "cluster.delivery";
}

/// Entries per snapshot page: a page stays far below NATS's default 1 MB message limit.
const SNAPSHOT_PAGE: usize = 2_000;
/// Changes kept from a node while its snapshot is awaited; past this the node is dropped and
/// asked again with its next change.
const MAX_BUFFERED: usize = 100_000;

struct RemoteMember {
    node: String,
    presence: UserPresence,
    hidden: bool,
}

/// What this node knows of another's changes.
#[derive(Default)]
struct NodeState {
    incarnation: u64,
    /// The last change applied.
    seq: u64,
    /// A snapshot has been applied (changes are applied in order only after one).
    synced: bool,
    /// Changes that came before the snapshot did.
    buffer: Vec<Numbered>,
}

#[derive(Default)]
struct Replica {
    /// Channel id → its members on other nodes.
    channels: HashMap<String, Vec<RemoteMember>>,
    /// Sessions on other nodes: session id → (node, user id).
    sessions: HashMap<Uuid, (String, Uuid)>,
    /// Users with sessions on other nodes: user id → node → how many.
    users: HashMap<Uuid, HashMap<String, usize>>,
    nodes: HashMap<String, NodeState>,
}

/// The cluster's router; see the module documentation.
pub struct ClusterRouter {
    /// Itself, for the trait methods that start tasks (which hold it weakly).
    me: std::sync::Weak<ClusterRouter>,
    local: Arc<LocalRouter>,
    bus: Bus,
    incarnation: u64,
    /// This node's last change number. Held while a change is numbered and queued, and while a
    /// snapshot is taken, so that a snapshot's number covers exactly the changes before it.
    seq: Mutex<u64>,
    replica: Mutex<Replica>,
    /// Channel id → the task receiving its messages from other nodes (only channels with
    /// members here).
    subscriptions: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
}

fn message_topic(channel_id: &str) -> String {
    let mut topic = String::with_capacity(7 + 2 * channel_id.len());
    topic.push_str("chan.m.");
    for b in channel_id.as_bytes() {
        let _ = write!(topic, "{b:02x}");
    }
    topic
}

impl ClusterRouter {
    /// Starts sharing `local`'s channels over `bus`: answers snapshot requests and applies the
    /// other nodes' changes from now on.
    pub async fn start(local: Arc<LocalRouter>, bus: Bus) -> anyhow::Result<Arc<ClusterRouter>> {
        let incarnation = bus.incarnation();
        let mut changes = bus.subscribe(PRESENCE).await?;
        let mut requests = bus
            .subscribe(&format!("chan.snapshot.{}", bus.node()))
            .await?;
        let mut inbox = bus.subscribe(&inbox_topic(bus.node())).await?;
        let router = Arc::new_cyclic(|me| ClusterRouter {
            me: me.clone(),
            local,
            bus,
            incarnation,
            seq: Mutex::new(0),
            replica: Mutex::new(Replica::default()),
            subscriptions: Mutex::new(HashMap::new()),
        });
        let weak = Arc::downgrade(&router);
        tokio::spawn(async move {
            while let Some(message) = changes.next().await {
                let Some(router) = weak.upgrade() else { return };
                match decode::<Numbered>(&message.payload) {
                    Ok(numbered) => router.received(numbered),
                    Err(e) => tracing::warn!("cluster: unreadable channel change: {e}"),
                }
            }
        });
        let weak = Arc::downgrade(&router);
        tokio::spawn(async move {
            while let Some(message) = inbox.next().await {
                let Some(router) = weak.upgrade() else { return };
                router.delivered_here(&message.payload);
            }
        });
        let weak = Arc::downgrade(&router);
        tokio::spawn(async move {
            while let Some(message) = requests.next().await {
                let Some(router) = weak.upgrade() else { return };
                if let Some(reply) = message.reply {
                    let Ok(ask) = decode::<SnapshotAsk>(&message.payload) else {
                        continue;
                    };
                    let snapshot = router.snapshot(&ask.after);
                    router.bus.answer(reply, &snapshot).await;
                }
            }
        });
        Ok(router)
    }

    fn me(&self) -> Option<Arc<ClusterRouter>> {
        self.me.upgrade()
    }

    /// The page of this node's members and sessions that follows `after` (in the order of their
    /// keys; empty for the first page), and its current change number. Pages follow keys, not
    /// positions: an entry that is there throughout is on exactly one page however the others
    /// change meanwhile (their changes are numbered, so the asker applies them afterwards).
    fn snapshot(&self, after: &str) -> Snapshot {
        // Read under the number's lock: a change made to the registry but not yet numbered
        // shows here and again as a change; applying a change twice changes nothing.
        let guard = self.seq.lock();
        let mut entries: Vec<(String, Change)> =
            self.local
                .channels()
                .members_snapshot()
                .into_iter()
                .map(|(channel, presence, hidden)| {
                    let key = format!("j\u{0}{channel}\u{0}{}", presence.session_id);
                    let change = Change::Join {
                        channel: channel.to_string(),
                        presence,
                        hidden,
                    };
                    (key, change)
                })
                .chain(self.local.sessions().all_sessions().into_iter().map(
                    |(session_id, user_id)| {
                        let key = format!("s\u{0}{session_id}");
                        (
                            key,
                            Change::SessionUp {
                                session_id,
                                user_id,
                            },
                        )
                    },
                ))
                .filter(|(key, _)| key.as_str() > after)
                .collect();
        let seq = guard.map(|s| *s).unwrap_or(0);
        entries.sort_by(|x, y| x.0.cmp(&y.0));
        let more = entries.len() > SNAPSHOT_PAGE;
        entries.truncate(SNAPSHOT_PAGE);
        Snapshot {
            incarnation: self.incarnation,
            seq,
            next: if more {
                entries.last().map(|(key, _)| key.clone())
            } else {
                None
            },
            members: entries.into_iter().map(|(_, change)| change).collect(),
        }
    }

    /// Numbers a change of this node's members and publishes it, in order.
    fn publish(&self, change: Change) {
        let Ok(mut seq) = self.seq.lock() else { return };
        *seq += 1;
        let numbered = Numbered {
            node: self.bus.node().to_string(),
            incarnation: self.incarnation,
            seq: *seq,
            change,
        };
        self.bus.send_soon(PRESENCE, &numbered);
    }

    /// Receives other nodes' messages for `channel_id` while it has members here.
    fn subscribe_channel(self: &Arc<Self>, channel_id: &str) {
        let Ok(mut subscriptions) = self.subscriptions.lock() else {
            return;
        };
        if subscriptions.contains_key(channel_id) {
            return;
        }
        let weak = Arc::downgrade(self);
        let (id, topic) = (channel_id.to_string(), message_topic(channel_id));
        // Subscribed in order with this node's publications: before the presence of the join
        // that asked for it, so no node sees the member before this node hears the channel.
        let subscribed = self.bus.subscribe_soon(&topic);
        let task = tokio::spawn(async move {
            let Ok(mut messages) = subscribed.await else {
                tracing::warn!(channel = %id, "cluster: cannot subscribe to a channel");
                return;
            };
            while let Some(message) = messages.next().await {
                let Some(router) = weak.upgrade() else { return };
                router.deliver_from_elsewhere(&id, &message.payload);
            }
        });
        subscriptions.insert(channel_id.to_string(), task);
    }

    /// Stops receiving a channel's messages once it has no member here.
    fn unsubscribe_if_empty(&self, channel_id: &str) {
        if self.local.channel_members(channel_id) > 0 {
            return;
        }
        if let Some(task) = self
            .subscriptions
            .lock()
            .ok()
            .and_then(|mut s| s.remove(channel_id))
        {
            task.abort();
        }
    }

    /// A message another node published for `channel_id`: `node\n` then the envelope.
    fn deliver_from_elsewhere(&self, channel_id: &str, payload: &[u8]) {
        let Ok(message) = decode_borrowed::<ChannelMessage<&serde_bytes::Bytes>>(payload) else {
            tracing::warn!("cluster: unreadable channel message");
            return;
        };
        if message.node == self.bus.node() {
            return;
        }
        let Ok(envelope) = decode_protobuf(message.envelope) else {
            tracing::warn!("cluster: undecodable channel message");
            return;
        };
        if let Some(channel) = self.local.channels().get(channel_id) {
            self.local
                .channels()
                .broadcast(&channel, &Encoded::new(envelope));
        }
    }

    /// Tells this node's members of `channel_id` that a member elsewhere joined or left.
    fn tell_locals(&self, channel_id: &str, presence: &UserPresence, joined: bool) {
        let registry = self.local.channels();
        if let Some(channel) = registry.get(channel_id) {
            let event = if joined {
                registry.events().joined(channel_id, presence.clone())
            } else {
                registry.events().left(channel_id, presence.clone())
            };
            registry.broadcast(&channel, &event);
        }
    }

    /// Applies one change of `node`'s members to the replica (a change already applied changes
    /// nothing), telling this node's members of the channel.
    fn apply(&self, replica: &mut Replica, node: &str, change: Change) {
        match change {
            Change::Join {
                channel,
                presence,
                hidden,
            } => {
                let members = replica.channels.entry(channel.clone()).or_default();
                if members
                    .iter()
                    .any(|m| m.presence.session_id == presence.session_id)
                {
                    return;
                }
                if !hidden {
                    self.tell_locals(&channel, &presence, true);
                }
                members.push(RemoteMember {
                    node: node.to_string(),
                    presence,
                    hidden,
                });
            }
            Change::Leave {
                channel,
                session_id,
            } => {
                let Some(members) = replica.channels.get_mut(&channel) else {
                    return;
                };
                let Some(at) = members
                    .iter()
                    .position(|m| m.presence.session_id == session_id)
                else {
                    return;
                };
                let gone = members.swap_remove(at);
                if members.is_empty() {
                    replica.channels.remove(&channel);
                }
                if !gone.hidden {
                    self.tell_locals(&channel, &gone.presence, false);
                }
            }
            Change::SessionUp {
                session_id,
                user_id,
            } => {
                if replica
                    .sessions
                    .insert(session_id, (node.to_string(), user_id))
                    .is_none()
                {
                    *replica
                        .users
                        .entry(user_id)
                        .or_default()
                        .entry(node.to_string())
                        .or_default() += 1;
                }
            }
            Change::SessionDown { session_id } => {
                if let Some((node, user_id)) = replica.sessions.remove(&session_id) {
                    forget_user_session(&mut replica.users, user_id, &node);
                }
            }
        }
    }

    /// Removes every member of `node` from the replica, telling this node's members.
    fn forget_node(&self, replica: &mut Replica, node: &str) {
        let mut gone = Vec::new();
        replica.channels.retain(|channel, members| {
            members.retain(|m| {
                if m.node == node {
                    gone.push((channel.clone(), m.presence.clone(), m.hidden));
                    false
                } else {
                    true
                }
            });
            !members.is_empty()
        });
        for (channel, presence, hidden) in gone {
            if !hidden {
                self.tell_locals(&channel, &presence, false);
            }
        }
        replica.sessions.retain(|_, (n, _)| n != node);
        replica.users.retain(|_, nodes| {
            nodes.remove(node);
            !nodes.is_empty()
        });
        replica.nodes.remove(node);
    }

    /// A numbered change from the bus.
    fn received(self: &Arc<Self>, numbered: Numbered) {
        if numbered.node == self.bus.node() {
            return;
        }
        let Ok(mut replica) = self.replica.lock() else {
            return;
        };
        let node = numbered.node.clone();
        let known = replica.nodes.get(&node).map(|s| s.incarnation);
        if known != Some(numbered.incarnation) && known != Some(0) {
            // A node not heard from, or a new incarnation of one (whose old members are gone):
            // start over from a snapshot, keeping this change for after it.
            if known.is_some() {
                self.forget_node(&mut replica, &node);
            }
            replica.nodes.insert(
                node.clone(),
                NodeState {
                    incarnation: numbered.incarnation,
                    buffer: vec![numbered],
                    ..Default::default()
                },
            );
            drop(replica);
            self.request_snapshot(node);
            return;
        }
        let Some(state) = replica.nodes.get_mut(&node) else {
            return;
        };
        if state.incarnation == 0 {
            // Asked for a snapshot when the node joined; this change waits for it.
            state.incarnation = numbered.incarnation;
        }
        if !state.synced {
            if state.buffer.len() >= MAX_BUFFERED {
                // Its snapshot is not coming: forget the node; its next change starts over.
                tracing::warn!(%node, "cluster: no snapshot in time; dropping what was buffered");
                self.forget_node(&mut replica, &node);
                return;
            }
            state.buffer.push(numbered);
            return;
        }
        if numbered.seq <= state.seq {
            return;
        }
        if numbered.seq != state.seq + 1 {
            // A change was lost (NATS reconnected): resynchronise from a snapshot.
            state.synced = false;
            state.buffer = vec![numbered];
            drop(replica);
            self.request_snapshot(node);
            return;
        }
        state.seq = numbered.seq;
        self.apply(&mut replica, &node, numbered.change);
    }

    /// Asks `node` for its members (on a task) and applies them with what came meanwhile.
    fn request_snapshot(self: &Arc<Self>, node: String) {
        let router = self.clone();
        tokio::spawn(async move {
            for attempt in 1..=SNAPSHOT_ATTEMPTS {
                match router.fetch_snapshot(&node).await {
                    Ok(snapshot) => return router.apply_snapshot(&node, snapshot),
                    Err(e) => tracing::warn!(%node, attempt, "cluster: no snapshot: {e:#}"),
                }
                // Gone meanwhile (its members were dropped with it): nothing to wait for.
                let waiting = router
                    .replica
                    .lock()
                    .map(|r| r.nodes.get(&node).is_some_and(|s| !s.synced))
                    .unwrap_or(false);
                if !waiting {
                    return;
                }
                tokio::time::sleep(SNAPSHOT_TIMEOUT / 4).await;
            }
        });
    }

    /// Every page of `node`'s snapshot. The change number is the first page's: whatever changed
    /// while later pages were read is numbered after it, so it is applied again from the buffer
    /// (applying a change twice changes nothing).
    async fn fetch_snapshot(&self, node: &str) -> anyhow::Result<Snapshot> {
        let topic = format!("chan.snapshot.{node}");
        let mut whole: Option<Snapshot> = None;
        let mut after = String::new();
        loop {
            let ask = SnapshotAsk {
                after: after.clone(),
            };
            let part: Snapshot = self.bus.ask(&topic, &ask, SNAPSHOT_TIMEOUT).await?;
            let next = part.next.clone();
            match whole.as_mut() {
                None => whole = Some(part),
                Some(w) if w.incarnation == part.incarnation => w.members.extend(part.members),
                Some(_) => anyhow::bail!("{node} restarted while its snapshot was read"),
            }
            match next {
                Some(key) => after = key,
                None => break,
            }
        }
        whole.ok_or_else(|| anyhow::anyhow!("empty snapshot"))
    }

    fn apply_snapshot(&self, node: &str, snapshot: Snapshot) {
        let Ok(mut replica) = self.replica.lock() else {
            return;
        };
        let mut buffered = match replica.nodes.get_mut(node) {
            // Awaited: for this incarnation, or for a node not heard from yet (incarnation 0).
            Some(state)
                if !state.synced
                    && (state.incarnation == snapshot.incarnation || state.incarnation == 0) =>
            {
                state.incarnation = snapshot.incarnation;
                state.synced = true;
                state.seq = snapshot.seq;
                std::mem::take(&mut state.buffer)
            }
            // Stale (another incarnation came meanwhile) or already synchronised.
            _ => return,
        };
        // What the node has now: members the replica lacks join, members it no longer has leave.
        let mut current: HashSet<(String, String)> = HashSet::new();
        let mut sessions: HashSet<Uuid> = HashSet::new();
        for change in snapshot.members {
            match &change {
                Change::Join {
                    channel, presence, ..
                } => {
                    current.insert((channel.clone(), presence.session_id.clone()));
                }
                Change::SessionUp { session_id, .. } => {
                    sessions.insert(*session_id);
                }
                _ => {}
            }
            self.apply(&mut replica, node, change);
        }
        let gone_sessions: Vec<Uuid> = replica
            .sessions
            .iter()
            .filter(|(id, (n, _))| n == node && !sessions.contains(id))
            .map(|(id, _)| *id)
            .collect();
        for session_id in gone_sessions {
            self.apply(&mut replica, node, Change::SessionDown { session_id });
        }
        let stale: Vec<(String, String)> = replica
            .channels
            .iter()
            .flat_map(|(channel, members)| {
                members
                    .iter()
                    .filter(|m| m.node == node)
                    .map(|m| (channel.clone(), m.presence.session_id.clone()))
                    .collect::<Vec<_>>()
            })
            .filter(|key| !current.contains(key))
            .collect();
        for (channel, session_id) in stale {
            self.apply(
                &mut replica,
                node,
                Change::Leave {
                    channel,
                    session_id,
                },
            );
        }
        buffered.sort_by_key(|n| n.seq);
        for numbered in buffered {
            let Some(state) = replica.nodes.get_mut(node) else {
                return;
            };
            if numbered.seq <= state.seq {
                continue;
            }
            state.seq = numbered.seq;
            self.apply(&mut replica, node, numbered.change);
        }
    }

    /// A message another node sent to one of this node's sessions or users.
    fn delivered_here(&self, payload: &[u8]) {
        let Ok(delivery) = decode_borrowed::<ToNode<&serde_bytes::Bytes>>(payload) else {
            tracing::warn!("cluster: unreadable delivery");
            return;
        };
        if let Addressee::EndSession(id) = delivery.to {
            if let Some(session) = self.local.sessions().session(id) {
                session.outbox.kick();
            }
            return;
        }
        let Ok(envelope) = decode_protobuf(delivery.envelope) else {
            tracing::warn!("cluster: undecodable delivery");
            return;
        };
        let message = Encoded::new(envelope);
        match delivery.to {
            Addressee::Session(id) => {
                self.local.send_to_session(id, &message);
            }
            Addressee::User(id) => {
                self.local.send_to_user(id, &message);
            }
            Addressee::EndSession(_) => {}
        }
    }

    fn remote_presences(&self, channel_id: &str, limit: usize) -> Vec<UserPresence> {
        self.replica
            .lock()
            .ok()
            .and_then(|r| {
                r.channels.get(channel_id).map(|members| {
                    members
                        .iter()
                        .filter(|m| !m.hidden)
                        .take(limit)
                        .map(|m| m.presence.clone())
                        .collect()
                })
            })
            .unwrap_or_default()
    }

    /// Publishes `message` to the channel's members on other nodes, when it has any.
    fn send_to_remote_members(&self, channel_id: &str, message: &Encoded) {
        if self.remote_count(channel_id) > 0 {
            let envelope = message.protobuf();
            let message = ChannelMessage {
                node: self.bus.node().to_owned(),
                envelope: serde_bytes::Bytes::new(&envelope),
            };
            self.bus.send_soon(&message_topic(channel_id), &message);
        }
    }

    fn remote_count(&self, channel_id: &str) -> usize {
        self.replica
            .lock()
            .ok()
            .and_then(|r| r.channels.get(channel_id).map(Vec::len))
            .unwrap_or(0)
    }
}

impl Router for ClusterRouter {
    /// True for a session on another node once the message is on its way there.
    fn send_to_session(&self, session_id: Uuid, message: &Encoded) -> bool {
        if self.local.send_to_session(session_id, message) {
            return true;
        }
        let node = self
            .replica
            .lock()
            .ok()
            .and_then(|r| r.sessions.get(&session_id).map(|(node, _)| node.clone()));
        match node {
            Some(node) => {
                send_to_session_on(&self.bus, &node, session_id, message);
                true
            }
            None => false,
        }
    }

    /// Counts the user's sessions on other nodes as reached once the message is on its way.
    fn send_to_user(&self, user_id: Uuid, message: &Encoded) -> usize {
        let here = self.local.send_to_user(user_id, message);
        let elsewhere: Vec<(String, usize)> = self
            .replica
            .lock()
            .ok()
            .and_then(|r| {
                r.users
                    .get(&user_id)
                    .map(|nodes| nodes.iter().map(|(n, c)| (n.clone(), *c)).collect())
            })
            .unwrap_or_default();
        if elsewhere.is_empty() {
            return here;
        }
        let envelope = message.protobuf();
        let delivery = ToNode {
            to: Addressee::User(user_id),
            envelope: serde_bytes::Bytes::new(&envelope),
        };
        let payload = encode(&delivery);
        let mut reached = here;
        for (node, sessions) in elsewhere {
            self.bus
                .publish_encoded_soon(&inbox_topic(&node), payload.clone());
            reached += sessions;
        }
        reached
    }

    fn is_online(&self, user_id: Uuid) -> bool {
        self.local.is_online(user_id)
            || self
                .replica
                .lock()
                .is_ok_and(|r| r.users.contains_key(&user_id))
    }

    fn join_channel(
        &self,
        session: &Arc<Session>,
        channel_id: &str,
        flags: JoinFlags,
        limits: JoinLimits,
    ) -> Result<Joined, ChannelRefusal> {
        let mut joined = self
            .local
            .join_channel(session, channel_id, flags, limits)?;
        // A status follower is this node's only: the followed user's changes reach every node
        // on the presence topic anyway, and nothing is ever sent to the channel.
        if joined.new && !flags.follower {
            // The subscription first: queued before the presence, it reaches NATS first.
            if let Some(router) = self.me() {
                router.subscribe_channel(channel_id);
            }
            self.publish(Change::Join {
                channel: channel_id.to_string(),
                presence: crate::session::channels::member_presence(
                    session,
                    flags,
                    self.local.channels().events(),
                ),
                hidden: flags.hidden,
            });
        }
        let room = limits.max_listed.saturating_sub(joined.presences.len());
        joined
            .presences
            .extend(self.remote_presences(channel_id, room));
        Ok(joined)
    }

    fn leave_channel(
        &self,
        session: &Arc<Session>,
        channel_id: &str,
    ) -> Result<(), ChannelRefusal> {
        let follower = session
            .channels
            .find(channel_id)
            .is_some_and(|joined| joined.flags.follower);
        self.local.leave_channel(session, channel_id)?;
        if !follower {
            self.publish(Change::Leave {
                channel: channel_id.to_string(),
                session_id: session.session_id.to_string(),
            });
            self.unsubscribe_if_empty(channel_id);
        }
        Ok(())
    }

    fn send_to_channel(&self, channel: &Channel, message: &Encoded) -> Delivery {
        let delivery = self.local.send_to_channel(channel, message);
        self.send_to_remote_members(&channel.id, message);
        delivery
    }

    fn send_to_channel_id(&self, channel_id: &str, message: &Encoded) -> Delivery {
        let delivery = self.local.send_to_channel_id(channel_id, message);
        self.send_to_remote_members(channel_id, message);
        delivery
    }

    fn channel_members(&self, channel_id: &str) -> usize {
        self.local.channel_members(channel_id) + self.remote_count(channel_id)
    }
}

/// A session that ends leaves its channels here and, through the bus, everywhere.
impl SessionObserver for ClusterRouter {
    fn session_opened(&self, session: &Arc<Session>) {
        self.publish(Change::SessionUp {
            session_id: session.session_id,
            user_id: session.user_id,
        });
    }

    fn session_closed(&self, session: &Arc<Session>) {
        let channels = session.channels.memberships();
        self.local.session_closed(session);
        for (channel_id, _) in channels.into_iter().filter(|(_, flags)| !flags.follower) {
            self.publish(Change::Leave {
                channel: channel_id.to_string(),
                session_id: session.session_id.to_string(),
            });
            self.unsubscribe_if_empty(&channel_id);
        }
        self.publish(Change::SessionDown {
            session_id: session.session_id,
        });
    }
}

/// Nodes that join are asked for their members; nodes that leave take theirs with them.
impl MembershipObserver for ClusterRouter {
    fn node_joined(&self, node: &str) {
        let Some(router) = self.me() else { return };
        let unknown = self
            .replica
            .lock()
            .map(|mut r| {
                let unknown = !r.nodes.contains_key(node);
                if unknown {
                    r.nodes.insert(node.to_string(), NodeState::default());
                }
                unknown
            })
            .unwrap_or(false);
        if unknown {
            router.request_snapshot(node.to_string());
        }
    }

    fn node_left(&self, node: &str, _why: Departure) {
        if let Ok(mut replica) = self.replica.lock() {
            self.forget_node(&mut replica, node);
        }
    }
}

fn forget_user_session(
    users: &mut HashMap<Uuid, HashMap<String, usize>>,
    user_id: Uuid,
    node: &str,
) {
    if let Some(nodes) = users.get_mut(&user_id) {
        if let Some(count) = nodes.get_mut(node) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                nodes.remove(node);
            }
        }
        if nodes.is_empty() {
            users.remove(&user_id);
        }
    }
}

/// Queues `message` for session `session_id` of node `node`.
pub(crate) fn send_to_session_on(bus: &Bus, node: &str, session_id: Uuid, message: &Encoded) {
    let envelope = message.protobuf();
    let delivery = ToNode {
        to: Addressee::Session(session_id),
        envelope: serde_bytes::Bytes::new(&envelope),
    };
    bus.send_soon(&inbox_topic(node), &delivery);
}

/// Closes the socket of session `session_id` of node `node`.
pub(crate) fn end_session_on(bus: &Bus, node: &str, session_id: Uuid) {
    let delivery = ToNode {
        to: Addressee::EndSession(session_id),
        envelope: serde_bytes::Bytes::new(&[]),
    };
    bus.send_soon(&inbox_topic(node), &delivery);
}

fn inbox_topic(node: &str) -> String {
    format!("node.{node}.deliver")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::metrics::Metrics;
    use crate::cluster::config::ClusterConfig;
    use crate::cluster::local::tests::Quiet;
    use crate::session::channels::ChannelRegistry;
    use crate::session::{Format, SessionRegistry};
    use muster_proto::realtime::{Envelope, Message, Pong};

    /// A node: its sessions and its cluster router on the test's NATS.
    async fn node(
        nats: &str,
        prefix: &str,
        name: &str,
    ) -> (Arc<SessionRegistry>, Arc<ClusterRouter>) {
        let metrics = Arc::new(Metrics::new());
        let sessions = Arc::new(SessionRegistry::new(metrics.clone()));
        let local = Arc::new(LocalRouter::new(
            sessions.clone(),
            ChannelRegistry::new(Arc::new(Quiet), metrics),
        ));
        let config = ClusterConfig {
            nats_url: nats.into(),
            node_name: name.into(),
            subject_prefix: prefix.into(),
            ..Default::default()
        };
        let bus = Bus::connect(&config).await.expect("NATS");
        let router = ClusterRouter::start(local, bus).await.expect("router");
        sessions.on_session_closed(router.clone());
        (sessions, router)
    }

    async fn until(what: &str, check: impl Fn() -> bool) {
        for _ in 0..200 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("timed out waiting for {what}");
    }

    /// Deliveries to a session and to a user on another node arrive in their outboxes.
    #[tokio::test]
    #[ignore = "needs NATS (TEST_NATS_URL)"]
    async fn delivers_to_sessions_and_users_on_another_node() {
        let nats = std::env::var("TEST_NATS_URL").expect("this test needs NATS: set TEST_NATS_URL");
        let prefix = format!("u{}", Uuid::new_v4().simple());
        let (_, a) = node(&nats, &prefix, "a").await;
        let (sessions_b, b) = node(&nats, &prefix, "b").await;
        // a learns of b's sessions from b's changes (it asks for b's snapshot first).
        let user = Uuid::new_v4();
        let open = || {
            let place = sessions_b.admit(0).expect("no limit");
            sessions_b.register(place, user, "bob", Format::Json, 8)
        };
        let (first, second) = (open(), open());
        until("a sees bob online", || a.is_online(user)).await;
        let pong = Encoded::new(Envelope::new("", Message::Pong(Pong {})));

        assert!(a.send_to_session(first.entry.session_id, &pong));
        until("the session's delivery", || !first.entry.outbox.is_empty()).await;
        assert_eq!(first.entry.outbox.drain().messages.len(), 1);
        assert!(second.entry.outbox.is_empty(), "only the session named");

        assert_eq!(a.send_to_user(user, &pong), 2, "both of bob's sessions");
        until("the user's delivery", || {
            !first.entry.outbox.is_empty() && !second.entry.outbox.is_empty()
        })
        .await;
        assert!(!a.send_to_session(Uuid::new_v4(), &pong), "nobody anywhere");

        drop((first, second));
        until("bob offline at a", || !a.is_online(user)).await;
        assert_eq!(a.send_to_user(user, &pong), 0);
        drop(b);
    }

    /// A node that joins late learns thousands of sessions through a snapshot of several pages.
    #[tokio::test]
    async fn a_late_node_learns_every_session_through_a_paged_snapshot() {
        let Ok(nats) = std::env::var("TEST_NATS_URL") else {
            return;
        };
        let prefix = format!("p{}", Uuid::new_v4().simple());
        let (sessions_b, b) = node(&nats, &prefix, "b").await;
        let users: Vec<Uuid> = (0..2 * SNAPSHOT_PAGE + 500)
            .map(|_| Uuid::new_v4())
            .collect();
        let guards: Vec<_> = users
            .iter()
            .map(|user| {
                let place = sessions_b.admit(0).expect("no limit");
                sessions_b.register(place, *user, "player", Format::Json, 8)
            })
            .collect();
        let (_, a) = node(&nats, &prefix, "a").await;
        // b's next change makes a ask for everything b has.
        let last = {
            let place = sessions_b.admit(0).expect("no limit");
            sessions_b.register(place, Uuid::new_v4(), "late", Format::Json, 8)
        };
        until("a knows b's last session", || {
            a.is_online(last.entry.user_id)
        })
        .await;
        let known = users.iter().filter(|u| a.is_online(**u)).count();
        assert_eq!(known, users.len(), "every session, across 3 pages");
        drop((guards, last, b));
    }
}
