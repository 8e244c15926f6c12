//! A world spread over a cluster's nodes (docs/world.md, "A world on several nodes").
//!
//! - **Leases**: each shard is run by the one node holding its lease in PostgreSQL
//!   ([`crate::world::store::WorldLeaseStore`]: holder, epoch, expiry on the database's clock). The
//!   holder renews every quarter of `world.lease_ms`; each renewal moves the shard's [`Fence`]
//!   to a quarter of the lease before its expiry, so a node that cannot renew stops ticking,
//!   acknowledging and checkpointing the shard before any other node can take it.
//! - **Placement**: balanced by shard count. Every node aims at `ceil(shards / live nodes)`; one
//!   with fewer takes a free shard (those it ranks first by rendezvous hashing before the
//!   others), one with more hands one over after a last checkpoint. A node that stops (SIGTERM)
//!   checkpoints its shards and releases their leases, so they move at once; one killed is
//!   replaced once its leases expire.
//! - **State**: checkpoints and action logs live in `world.checkpoint_dir`, a volume every node
//!   mounts; a node taking a shard restores its last checkpoint and replays the acknowledged
//!   actions logged after it. The volume is checked at start (its id against the database's).
//! - **Any node serves**: subscriptions and actions for a shard run elsewhere go to its owner
//!   over NATS ([`super::remote`]); views come back to the socket's node. Every node keeps what
//!   its sockets watch, and subscribes them again when their shard moves: they get a fresh
//!   snapshot.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use muster_proto::realtime::{Envelope, Message, WorldState, WorldSubscribe};
use muster_world::geo::Rect;
use uuid::Uuid;

use super::actions::Action;
use super::fence::Fence;
use super::metrics::WorldMetrics;
use super::remote::{self, ActAnswer, Asked};
use super::runner::Sink;
use super::{ClusterSeat, Command, World};
use crate::base::rpc::{RpcCode, RpcError};
use crate::cluster::bus::Bus;
use crate::session::fanout::Encoded;
use crate::session::Session;
use crate::world::store::WorldLeaseStore;

/// The volume's id file in the checkpoints' folder.
const VOLUME_FILE: &str = "volume.id";

/// A box a socket of this node watches.
struct Watch {
    session: Weak<Session>,
    request: WorldSubscribe,
}

/// A lease this node holds.
struct Held {
    epoch: i64,
    fence: Arc<Fence>,
}

/// A clustered world's part of [`World`].
pub(super) struct WorldCluster {
    pub(super) bus: Bus,
    leases: Arc<dyn WorldLeaseStore>,
    lease: Duration,
    settle: Duration,
    /// The other live nodes.
    pub(super) peers: parking_lot::Mutex<BTreeSet<String>>,
    /// What this node's sockets watch, wherever their shard runs (one box per socket).
    watchers: parking_lot::Mutex<HashMap<Uuid, Watch>>,
    /// The leases this node holds (a shard being restored included).
    held: parking_lot::Mutex<BTreeMap<u32, Held>>,
    /// Remote subscribers' views waiting to be published (bounded).
    pub(super) views_out: tokio::sync::mpsc::Sender<remote::ViewMessage>,
    /// Held while the leases are being released: a second caller waits for the first.
    releasing: tokio::sync::Mutex<()>,
}

/// Checks that `dir` is the volume the cluster's world lives on: its id file (made by the
/// first node to start) must name the id the database recorded.
pub(super) async fn check_volume(dir: &Path, leases: &dyn WorldLeaseStore) -> anyhow::Result<()> {
    let path = dir.join(VOLUME_FILE);
    let mine = match std::fs::read_to_string(&path) {
        Ok(id) => id.trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = Uuid::new_v4().to_string();
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut file) => {
                    use std::io::Write as _;
                    file.write_all(id.as_bytes())?;
                    file.sync_all()?;
                    id
                }
                // Another node made it first.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    std::fs::read_to_string(&path)?.trim().to_string()
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => anyhow::bail!("world: reading {}: {e}", path.display()),
    };
    let recorded = leases
        .world_volume(&mine)
        .await
        .map_err(|e| anyhow::anyhow!("world: reading the world's volume id: {e}"))?;
    if recorded != mine {
        anyhow::bail!(
            "world.checkpoint_dir ({}) is not the volume this cluster's world lives on: it holds \
             volume {mine}, the database names {recorded}. Every node must mount the same \
             volume there.",
            dir.display()
        );
    }
    Ok(())
}

/// This node's rank for `shard` (rendezvous hashing: the live node with the highest runs it
/// when placement is free to choose).
fn score(node: &str, shard: u32) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (node, shard).hash(&mut hasher);
    hasher.finish()
}

/// What placement does next on a node running `mine` of `shards` shards, with `live` nodes in
/// the cluster (this one included) and `free` shards no node holds.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    Take(Vec<u32>),
    HandOver(u32),
    Stay,
}

/// Balanced by shard count: every node aims at `ceil(shards / live)`.
pub(super) fn placement(
    me: &str,
    live: &BTreeSet<String>,
    shards: usize,
    mine: &[u32],
    free: &[u32],
) -> Step {
    let target = shards.div_ceil(live.len().max(1));
    if mine.len() > target {
        // The shard this node ranks lowest goes.
        let pick = mine.iter().copied().min_by_key(|s| score(me, *s));
        return pick.map_or(Step::Stay, Step::HandOver);
    }
    if mine.len() < target && !free.is_empty() {
        // Free shards this node ranks first among the live nodes come first.
        let first =
            |s: u32| live.iter().max_by_key(|n| score(n, s)).map(String::as_str) == Some(me);
        let mut order: Vec<u32> = free.to_vec();
        order.sort_by_key(|s| (!first(*s), std::cmp::Reverse(score(me, *s))));
        return Step::Take(order);
    }
    Step::Stay
}

impl WorldCluster {
    /// The cluster part of a world; starts the task that publishes remote subscribers' views.
    pub(super) fn new(seat: ClusterSeat, config: &crate::world::config::WorldConfig) -> Self {
        let (views_out, mut waiting) =
            tokio::sync::mpsc::channel::<remote::ViewMessage>(remote::VIEWS_WAITING);
        let bus = seat.bus.clone();
        tokio::spawn(async move {
            while let Some(message) = waiting.recv().await {
                bus.publish_encoded(&message.topic, message.bytes).await;
            }
        });
        WorldCluster {
            views_out,
            releasing: tokio::sync::Mutex::new(()),
            bus: seat.bus,
            leases: seat.leases,
            lease: Duration::from_millis(config.lease_ms),
            settle: seat.settle,
            peers: parking_lot::Mutex::new(BTreeSet::new()),
            watchers: parking_lot::Mutex::new(HashMap::new()),
            held: parking_lot::Mutex::new(BTreeMap::new()),
        }
    }

    fn node(&self) -> &str {
        self.bus.node()
    }

    /// Until when a lease taken or renewed at `asked` (before the request left) may be used:
    /// a quarter of it before its expiry on the database's clock, which counts from later.
    fn deadline(&self, asked: Instant) -> Instant {
        asked + self.lease - self.lease / 4
    }

    /// Records that `session` watches `request`'s box; the shard it watched before, if any.
    pub(super) fn watch(&self, session: &Arc<Session>, request: &WorldSubscribe) -> Option<u32> {
        let watch = Watch {
            session: Arc::downgrade(session),
            request: request.clone(),
        };
        self.watchers
            .lock()
            .insert(session.session_id, watch)
            .map(|w| w.request.shard)
    }

    /// Forgets what `session_id` watched; its shard, if any.
    pub(super) fn unwatch(&self, session_id: Uuid) -> Option<u32> {
        self.watchers
            .lock()
            .remove(&session_id)
            .map(|w| w.request.shard)
    }

    /// Asks the owner of `shard` to subscribe this node's socket `session_id` to `rect`.
    pub(super) async fn subscribe_remote(
        &self,
        shard: u32,
        session_id: Uuid,
        format: crate::session::Format,
        rect: Rect,
        metrics: &WorldMetrics,
    ) -> Result<WorldState, String> {
        let request = remote::SubscribeRequest {
            node: self.node().to_string(),
            session_id,
            protobuf: format == crate::session::Format::Protobuf,
            rect: [rect.min.x, rect.min.y, rect.max.x, rect.max.y],
        };
        let asked = remote::ask_owner(
            &self.bus,
            shard,
            "subscribe",
            &request,
            remote::SUBSCRIBE_TIMEOUT,
        )
        .await;
        let (result, answer) = match asked {
            Asked::Answer(answer) => {
                let answer = remote::SubscribeAnswer::into_result(answer);
                (if answer.is_ok() { "ok" } else { "error" }, answer)
            }
            Asked::NoOwner => ("no_owner", Err(moving_subscription(shard))),
            Asked::Failed(why) => {
                tracing::warn!(shard, %why, "world: the shard's node did not answer a subscription");
                (
                    "error",
                    Err(format!(
                        "the node that runs shard {shard} did not answer; try again shortly"
                    )),
                )
            }
        };
        metrics
            .remote
            .with_label_values(&["subscribe", result])
            .inc();
        answer
    }

    /// Tells the owner of `shard` that `session_id` no longer watches it.
    pub(super) fn unsubscribe_remote(&self, shard: u32, session_id: Uuid) {
        let request = remote::UnsubscribeRequest { session_id };
        self.bus
            .send_soon(&remote::shard_topic(shard, "unsubscribe"), &request);
    }

    /// Asks the owner of `shard` to apply `action` of `user`.
    pub(super) async fn act_remote(
        &self,
        shard: u32,
        user: Uuid,
        action: Action,
        metrics: &WorldMetrics,
    ) -> Result<serde_json::Value, RpcError> {
        let request = remote::ActRequest { user, action };
        let asked = remote::ask_owner(&self.bus, shard, "act", &request, remote::ACT_TIMEOUT);
        let (result, answer) = match asked.await {
            Asked::Answer(answer) => ("ok", ActAnswer::into_result(answer)),
            Asked::NoOwner => ("no_owner", Err(super::runner::moving(shard))),
            // The action may have been applied: the player can look before trying again.
            Asked::Failed(why) => {
                tracing::warn!(shard, %why, "world: the shard's node did not answer an action");
                (
                    "error",
                    Err(RpcError::new(
                        RpcCode::Unavailable,
                        format!(
                            "The node that runs shard {shard} did not answer in time; the action \
                             may or may not have been applied."
                        ),
                    )),
                )
            }
        };
        metrics.remote.with_label_values(&["act", result]).inc();
        answer
    }

    /// Releases every lease this node holds (after the shards' last checkpoints).
    pub(super) async fn release_all(&self, metrics: &WorldMetrics) {
        let _releasing = self.releasing.lock().await;
        let held: Vec<(u32, i64)> = std::mem::take(&mut *self.held.lock())
            .into_iter()
            .map(|(s, h)| (s, h.epoch))
            .collect();
        for (shard, epoch) in held {
            if self.release(shard, epoch).await {
                metrics.moves.with_label_values(&["released"]).inc();
            }
        }
    }

    /// Gives `shard`'s lease at `epoch` up; false (logged) when the database did not take it:
    /// the shard then moves once the lease expires.
    async fn release(&self, shard: u32, epoch: i64) -> bool {
        match self
            .leases
            .release_shard(shard as i32, self.node(), epoch)
            .await
        {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(shard, %error, "world: releasing a shard's lease failed; it moves once it expires");
                false
            }
        }
    }
}

/// Stops `shard` on this node (after a last checkpoint when `checkpoint`), off the runtime's
/// threads.
async fn stop_here(world: &Arc<World>, shard: u32, checkpoint: bool) {
    let stopping = world.clone();
    let _ =
        tokio::task::spawn_blocking(move || stopping.stop_shard(shard as usize, checkpoint)).await;
}

/// Starts a clustered world's tasks: this node's views and moves from the other nodes, the
/// lease renewals and the placement.
pub(super) async fn start(world: &Arc<World>) -> anyhow::Result<()> {
    let Some(cluster) = &world.cluster else {
        return Ok(());
    };
    let mut views = cluster
        .bus
        .subscribe(&remote::view_topic(cluster.node()))
        .await?;
    let mut moves = cluster.bus.subscribe(remote::MOVED_TOPIC).await?;
    let weak = Arc::downgrade(world);
    tokio::spawn(async move {
        while let Some(message) = views.next().await {
            let Some(world) = weak.upgrade() else { return };
            deliver_views(&world, &message.payload);
        }
    });
    let weak = Arc::downgrade(world);
    tokio::spawn(async move {
        while let Some(message) = moves.next().await {
            let Some(world) = weak.upgrade() else { return };
            if let Ok(moved) = crate::cluster::protocol::decode::<remote::Moved>(&message.payload) {
                resubscribe(&world, moved.shard);
            }
        }
    });
    tokio::spawn(renew(world.clone()));
    tokio::spawn(place(world.clone()));
    // A node that stops hands its shards over as soon as their last checkpoints are written,
    // not after its sockets have closed.
    let draining = world.clone();
    tokio::spawn(async move {
        draining.shutdown.cancelled().await;
        let stopping = draining.clone();
        let _ = tokio::task::spawn_blocking(move || stopping.stop()).await;
        draining.release().await;
    });
    Ok(())
}

/// Updates from a shard's node for sockets of this node, encoded for them already.
fn deliver_views(world: &World, bytes: &bytes::Bytes) {
    let Some(cluster) = &world.cluster else {
        return;
    };
    let views = remote::read_view_batch(bytes);
    let mut gone = Vec::new();
    let mut ready = Vec::with_capacity(views.len());
    {
        let watchers = cluster.watchers.lock();
        for view in views {
            let session = watchers
                .get(&view.session_id)
                .filter(|w| w.request.shard == view.shard)
                .and_then(|w| w.session.upgrade());
            match session {
                Some(session) => ready.push((session, view.frame)),
                None => gone.push((view.shard, view.session_id)),
            }
        }
    }
    for (session, frame) in ready {
        session.outbox.push(frame);
    }
    // Sockets gone, or watching another shard now: their shard's node stops sending.
    for (shard, session_id) in gone {
        cluster.unsubscribe_remote(shard, session_id);
    }
}

/// Subscribes again, where it runs now, every socket of this node watching `shard`; each gets
/// the fresh snapshot.
fn resubscribe(world: &Arc<World>, shard: u32) {
    let Some(cluster) = &world.cluster else {
        return;
    };
    let watching: Vec<(Arc<Session>, WorldSubscribe)> = cluster
        .watchers
        .lock()
        .values()
        .filter(|w| w.request.shard == shard)
        .filter_map(|w| Some((w.session.upgrade()?, w.request.clone())))
        .collect();
    for (session, request) in watching {
        let world = world.clone();
        tokio::spawn(async move {
            match world.subscribe_at(&session, &request).await {
                Ok(state) => {
                    Encoded::new(Envelope::new("", Message::WorldState(state))).deliver(&session);
                }
                Err(why) => {
                    tracing::debug!(shard, %why, "world: subscribing a socket again after its shard moved failed");
                }
            }
        });
    }
}

/// Renews this node's leases every quarter of a lease, until the world's last lease is
/// released; a lease found lost stops its shard at once.
async fn renew(world: Arc<World>) {
    let Some(cluster) = &world.cluster else {
        return;
    };
    let every = cluster.lease / 4;
    loop {
        tokio::time::sleep(every).await;
        if world.shutdown.is_cancelled() && cluster.held.lock().is_empty() {
            return;
        }
        let held: Vec<(u32, i64, Arc<Fence>)> = cluster
            .held
            .lock()
            .iter()
            .map(|(s, h)| (*s, h.epoch, h.fence.clone()))
            .collect();
        for (shard, epoch, fence) in held {
            if !fence.holds() {
                // Not renewed in time (the database was away or slow): the shard has stopped
                // here, so its lease goes too, for another node to take.
                tracing::warn!(
                    shard,
                    epoch,
                    "world: a shard's lease ran out before its renewal; the shard stops here"
                );
                give_up(&world, cluster, shard, epoch, true).await;
                continue;
            }
            let asked = Instant::now();
            let renewed = cluster
                .leases
                .renew_shard(
                    shard as i32,
                    cluster.node(),
                    epoch,
                    cluster.lease.as_millis() as i64,
                )
                .await;
            match renewed {
                Ok(true) => fence.extend_to(cluster.deadline(asked)),
                Ok(false) => {
                    tracing::warn!(
                        shard,
                        epoch,
                        "world: this node lost a shard's lease; the shard stops here"
                    );
                    give_up(&world, cluster, shard, epoch, false).await;
                }
                // The fence runs out by itself if the database stays away.
                Err(error) => {
                    tracing::warn!(shard, %error, "world: renewing a shard's lease failed")
                }
            }
        }
    }
}

/// Stops `shard` here at once, without a checkpoint (its lease is lost, or ran out), and
/// releases its lease when `release`.
async fn give_up(
    world: &Arc<World>,
    cluster: &WorldCluster,
    shard: u32,
    epoch: i64,
    release: bool,
) {
    if let Some(held) = cluster.held.lock().remove(&shard) {
        held.fence.revoke();
    }
    stop_here(world, shard, false).await;
    world.metrics.moves.with_label_values(&["lost"]).inc();
    if release {
        cluster.release(shard, epoch).await;
    }
}

/// Places shards: takes free ones while this node runs fewer than its share, hands one over
/// when it runs more. Stops taking at shutdown.
async fn place(world: Arc<World>) {
    let Some(cluster) = &world.cluster else {
        return;
    };
    let every = cluster.lease / 4;
    let began = Instant::now();
    while !world.shutdown.is_cancelled() {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = world.shutdown.cancelled() => return,
        }
        if began.elapsed() < cluster.settle {
            continue;
        }
        if let Err(error) = place_once(&world, cluster).await {
            tracing::warn!(%error, "world: placing shards failed; trying again");
        }
    }
}

async fn place_once(world: &Arc<World>, cluster: &WorldCluster) -> anyhow::Result<()> {
    let leases = cluster.leases.shard_leases().await?;
    let mine: Vec<u32> = cluster.held.lock().keys().copied().collect();
    let taken: BTreeSet<u32> = leases
        .iter()
        .filter(|l| l.held)
        .map(|l| l.shard as u32)
        .collect();
    let free: Vec<u32> = (0..world.config.shards as u32)
        .filter(|s| !taken.contains(s) && !mine.contains(s))
        .collect();
    let mut live = cluster.peers.lock().clone();
    live.insert(cluster.node().to_string());
    match placement(cluster.node(), &live, world.config.shards, &mine, &free) {
        Step::Stay => {}
        Step::HandOver(shard) => hand_over(world, cluster, shard).await,
        Step::Take(order) => {
            for shard in order {
                if take(world, cluster, shard).await? {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Takes `shard` if its lease is free: restores it (checkpoint and log), starts it, answers
/// for it, and tells every node. False when another node took it first.
async fn take(world: &Arc<World>, cluster: &WorldCluster, shard: u32) -> anyhow::Result<bool> {
    let asked = Instant::now();
    let Some(epoch) = cluster
        .leases
        .take_shard(
            shard as i32,
            cluster.node(),
            cluster.lease.as_millis() as i64,
        )
        .await?
    else {
        return Ok(false);
    };
    let fence = Arc::new(Fence::until(cluster.deadline(asked)));
    // Renewed from now on, during the restore too.
    cluster.held.lock().insert(
        shard,
        Held {
            epoch,
            fence: fence.clone(),
        },
    );
    tracing::info!(shard, epoch, "world: this node took a shard; restoring it");
    let started = Instant::now();
    let restoring = world.clone();
    let ran = tokio::task::spawn_blocking(move || restoring.run_shard(shard as usize, fence))
        .await
        .map_err(|e| anyhow::anyhow!("the restore panicked: {e}"))
        .and_then(|r| r);
    if let Err(error) = ran {
        tracing::error!(shard, %error, "world: the shard cannot be restored here; its lease is released");
        cluster.held.lock().remove(&shard);
        cluster.release(shard, epoch).await;
        return Ok(false);
    }
    world
        .metrics
        .start_seconds
        .observe(started.elapsed().as_secs_f64());
    world.metrics.moves.with_label_values(&["taken"]).inc();
    world
        .metrics
        .epoch
        .with_label_values(&[&shard.to_string()])
        .set(epoch);
    // Answering for it before anyone is told.
    let requests = cluster.bus.subscribe(&remote::shard_topics(shard)).await?;
    let serving = tokio::spawn(serve_shard(Arc::downgrade(world), shard, requests));
    if let Some(Some(running)) = world.running.read().get(shard as usize) {
        *running.serving.lock() = Some(serving.abort_handle());
    }
    let moved = remote::Moved { shard };
    cluster.bus.send(remote::MOVED_TOPIC, &moved).await;
    tracing::info!(
        shard,
        epoch,
        ms = started.elapsed().as_millis() as u64,
        "world: shard running here"
    );
    Ok(true)
}

/// Hands `shard` over: a last checkpoint, then its lease released (another node takes it).
async fn hand_over(world: &Arc<World>, cluster: &WorldCluster, shard: u32) {
    tracing::info!(shard, "world: handing a shard over to balance the nodes");
    stop_here(world, shard, true).await;
    let held = cluster.held.lock().remove(&shard);
    if let Some(held) = held {
        cluster.release(shard, held.epoch).await;
        world.metrics.moves.with_label_values(&["released"]).inc();
    }
}

/// Answers the other nodes' requests for `shard` while this node runs it.
async fn serve_shard(world: Weak<World>, shard: u32, mut requests: async_nats::Subscriber) {
    while let Some(message) = requests.next().await {
        let Some(world) = world.upgrade() else { return };
        let Some(cluster) = &world.cluster else {
            return;
        };
        let (kind, reply) = (message.subject.rsplit('.').next(), message.reply.clone());
        match (kind, reply) {
            (Some("act"), Some(reply)) => {
                let bus = cluster.bus.clone();
                tokio::spawn(async move {
                    let answer = act_for_node(&world, shard, &message.payload).await;
                    bus.answer(reply, &ActAnswer::of(answer)).await;
                });
            }
            (Some("subscribe"), Some(reply)) => {
                let bus = cluster.bus.clone();
                tokio::spawn(async move {
                    let answer = subscribe_for_node(&world, shard, &message.payload).await;
                    bus.answer(reply, &remote::SubscribeAnswer::of(answer))
                        .await;
                });
            }
            (Some("unsubscribe"), _) => {
                let request = crate::cluster::protocol::decode::<remote::UnsubscribeRequest>(
                    &message.payload,
                );
                if let (Ok(request), Some(inbox)) = (request, world.inbox(shard as usize)) {
                    let _ = inbox.try_send(Command::Unsubscribe {
                        session_id: request.session_id,
                    });
                }
            }
            _ => {}
        }
    }
}

/// Why a subscription to a shard in the middle of a move is refused.
fn moving_subscription(shard: u32) -> String {
    format!("shard {shard} is moving to another node; subscribe again shortly")
}

/// Another node's player's action on `shard`, run here.
async fn act_for_node(
    world: &World,
    shard: u32,
    payload: &[u8],
) -> Result<serde_json::Value, RpcError> {
    let request = crate::cluster::protocol::decode::<remote::ActRequest>(payload)
        .map_err(|e| RpcError::new(RpcCode::InvalidArgument, format!("Bad action: {e}.")))?;
    world.act_here(shard, request.user, request.action).await
}

/// Another node's socket subscribing to a box of `shard`, run here.
async fn subscribe_for_node(
    world: &World,
    shard: u32,
    payload: &[u8],
) -> Result<WorldState, String> {
    let request = crate::cluster::protocol::decode::<remote::SubscribeRequest>(payload)
        .map_err(|e| format!("bad subscription: {e}"))?;
    let inbox = world
        .inbox(shard as usize)
        .ok_or_else(|| moving_subscription(shard))?;
    let sink = Sink::Remote {
        node: Arc::from(request.node.as_str()),
        session_id: request.session_id,
        format: request.format(),
    };
    world
        .subscribe_here(&inbox, sink, request.session_id, request.rect())
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn placement_balances_by_shard_count() {
        let live = nodes(&["a", "b", "c"]);
        // 2 shards over 3 nodes: at most 1 each.
        assert_eq!(placement("a", &live, 2, &[0], &[1]), Step::Stay);
        assert!(matches!(placement("c", &live, 2, &[], &[1]), Step::Take(o) if o == vec![1]));
        // A node running both while another joined hands one over.
        let two = nodes(&["a", "b"]);
        assert!(matches!(placement("a", &two, 2, &[0, 1], &[]), Step::HandOver(s) if s < 2));
        // Alone, a node takes everything free.
        let alone = nodes(&["a"]);
        assert!(
            matches!(placement("a", &alone, 3, &[], &[0, 1, 2]), Step::Take(o) if o.len() == 3)
        );
        assert_eq!(placement("a", &alone, 3, &[0, 1, 2], &[]), Step::Stay);
        // Nothing free: nothing to take.
        assert_eq!(placement("b", &live, 2, &[], &[]), Step::Stay);
    }

    #[test]
    fn free_shards_a_node_ranks_first_come_first() {
        let live = nodes(&["a", "b", "c", "d"]);
        let shards: Vec<u32> = (0..64).collect();
        let Step::Take(order) = placement("a", &live, 256, &[], &shards) else {
            panic!("takes");
        };
        let first =
            |s: u32| live.iter().max_by_key(|n| score(n, s)).map(String::as_str) == Some("a");
        let ranked_first = order.iter().take_while(|s| first(**s)).count();
        assert!(ranked_first > 0);
        assert!(order[ranked_first..].iter().all(|s| !first(*s)));
    }
}
