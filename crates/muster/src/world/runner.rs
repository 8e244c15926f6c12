//! A shard's thread: it owns the shard, ticks it, serves the commands of its inbox (players'
//! actions, subscriptions), sends the subscribers their updates, and checkpoints.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use muster_proto::realtime::{Envelope, Message, WorldCreep, WorldState, WorldTower};
use muster_world::aoi::{Update, View};
use muster_world::checkpoint::Snapshot;
use muster_world::shard::Shard;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::actions::{self, Action};
use super::fence::Fence;
use super::log::{ActionLog, Record};
use super::metrics::WorldMetrics;
use super::payouts;
use super::writer::Writer;
use super::{Command, Ground};
use crate::base::rpc::{RpcCode, RpcError};
use crate::session::fanout::Encoded;
use crate::session::Session;

/// Where a subscriber's updates go.
pub(super) enum Sink {
    /// A socket of this node.
    Local(Arc<Session>),
    /// A socket of node `node` (a clustered world): its updates go over the bus to that node,
    /// which hands them to the socket.
    Remote {
        node: Arc<str>,
        session_id: Uuid,
        format: crate::session::Format,
    },
}

impl Sink {
    /// Whether it has taken its last update (a local socket's outbox is empty). A remote
    /// socket's node hands updates on as they come.
    fn ready(&self) -> bool {
        match self {
            Sink::Local(session) => session.outbox.is_empty(),
            Sink::Remote { .. } => true,
        }
    }
}

/// What serving a part of a tick's subscribers came to.
#[derive(Default)]
struct Served {
    /// Local sockets found closed.
    closed: Vec<Uuid>,
    /// Remote sockets' views, by node.
    remote: Vec<(Arc<str>, super::remote::ViewEntry)>,
}

/// One subscribed socket, on its shard's thread.
pub(super) struct Subscriber {
    pub(super) sink: Sink,
    pub(super) view: View,
    /// Which of the ticks of an update period serves it (subscribers are spread over them).
    pub(super) slot: u64,
}

/// How a shard serves areas of interest.
pub(super) struct Aoi {
    /// Ticks between two updates.
    pub(super) every: u64,
    pub(super) max_side: f32,
    pub(super) margin: f32,
    /// Threads that compute the views of a tick's subscribers: the cores (read once: on Linux
    /// asking means reading cgroup files).
    pub(super) threads: usize,
}

/// `view`'s next update as the wire carries it; `tick_unix_ms`: when its tick began.
fn next_state(shard: &Shard, view: &mut View, tick_unix_ms: u64) -> WorldState {
    let update: Update = view.update(shard);
    WorldState {
        shard: shard.id,
        tick_unix_ms,
        tick: update.tick_no,
        time_ms: update.now_ms,
        snapshot: update.snapshot,
        towers: update
            .towers
            .into_iter()
            .map(|t| WorldTower {
                id: t.id,
                x: t.pos.x,
                y: t.pos.y,
                owner: t.owner,
                level: u32::from(t.level),
            })
            .collect(),
        creeps: update
            .creeps
            .into_iter()
            .map(|c| WorldCreep {
                id: c.id,
                x: c.pos.x,
                y: c.pos.y,
                owner: c.owner,
            })
            .collect(),
        gone_creeps: update.gone_creeps,
        gone_towers: update.gone_towers,
    }
}

/// A record applied and waiting for the log's sync: an action, acknowledged once it is on
/// disk, or a credit, handed to the payouts once it is on disk.
pub(super) struct Unlogged {
    record: Record,
    then: Then,
}

pub(super) enum Then {
    Answer(
        serde_json::Value,
        tokio::sync::oneshot::Sender<Result<serde_json::Value, RpcError>>,
    ),
    Pay(payouts::Credit),
}

/// A refusal's error for the caller, with its reason.
fn refusal(error: &muster_world::WorldError) -> RpcError {
    RpcError::new(actions::code_of(error), format!("{error}."))
}

/// Answers a refused action with its reason.
fn refuse(
    reply: tokio::sync::oneshot::Sender<Result<serde_json::Value, RpcError>>,
    error: &muster_world::WorldError,
) {
    let _ = reply.send(Err(refusal(error)));
}

/// The answer to an action that reached a shard this node no longer runs.
pub(super) fn moving(shard: u32) -> RpcError {
    RpcError::new(
        RpcCode::Unavailable,
        format!("Shard {shard} is moving to another node; try again shortly."),
    )
}

fn broken_shard() -> RpcError {
    RpcError::new(
        RpcCode::Unavailable,
        "This shard takes no actions until the server restarts: its action log cannot be \
         written.",
    )
}

/// What a shard's thread owns.
pub(super) struct ShardRun {
    pub(super) aoi: Aoi,
    /// When the last tick began, Unix ms (carried in world states).
    pub(super) tick_unix_ms: u64,
    /// Where players' arrivals go to be paid.
    pub(super) payouts: Arc<payouts::Payouts>,
    /// The routing queue, and this shard's own inbox, where its routed connects come back.
    pub(super) routes: Arc<muster_world::routing::RouteQueue>,
    pub(super) own_inbox: mpsc::SyncSender<Command>,
    pub(super) ground: Arc<Ground>,
    pub(super) calc: muster_world::routing::PathCalculator,
    pub(super) log: ActionLog,
    /// What a reload after a failed append needs: the settings and the checkpoints' folder.
    pub(super) config: crate::world::config::WorldConfig,
    pub(super) dir: PathBuf,
    /// Set when the log could not be written and the shard could not be brought back to what
    /// the disk holds: it takes no more actions and writes no checkpoints until a restart.
    pub(super) broken: bool,
    /// Records applied since the last sync of the log.
    pub(super) unlogged: Vec<Unlogged>,
    /// The log's first sequence number after the checkpoint being written: once it is on disk,
    /// the segments before are deleted.
    pub(super) covered: Option<u64>,
    pub(super) commands: mpsc::Receiver<Command>,
    pub(super) subscribers: HashMap<Uuid, Subscriber>,
    /// The last slot given to a subscriber.
    pub(super) next_slot: u64,
    pub(super) shard: Shard,
    pub(super) path: PathBuf,
    pub(super) interval: Duration,
    pub(super) metrics: Arc<WorldMetrics>,
    /// Stops the shard (the server's shutdown, or the shard handed to another node).
    pub(super) stop: CancellationToken,
    /// Until when this node may run the shard (a clustered world's lease). Stopping writes a
    /// last checkpoint only while it holds (a lost lease revokes it).
    pub(super) fence: Arc<Fence>,
    /// Where remote subscribers' updates go to be published (bounded).
    pub(super) views_out: Option<tokio::sync::mpsc::Sender<super::remote::ViewMessage>>,
}

impl ShardRun {
    pub(super) fn run(mut self) {
        let period = Duration::from_secs_f64(1.0 / f64::from(self.shard.rules.tick_hz));
        // The shard's clock resumes where its checkpoint left it.
        let base_ms = self.shard.now_ms;
        let began = Instant::now();
        let writer = Writer::start(
            self.path.clone(),
            self.shard.id,
            self.metrics.clone(),
            self.fence.clone(),
        );
        // The snapshot this shard checkpoints into; `None` while its write is in flight.
        let mut spare = Some(Snapshot::default());
        let mut next_checkpoint = Instant::now() + self.interval;
        // The first tick at once: a shard taken over from another node moves again now.
        let mut next_tick = Instant::now();
        while !self.stop.is_cancelled() && self.fence.holds() {
            let now = Instant::now();
            if now < next_tick {
                // Wait for the tick, serving requests meanwhile (at most 50 ms at a time, so
                // that shutdown is noticed).
                let wait = (next_tick - now).min(Duration::from_millis(50));
                if let Ok(command) = self.commands.recv_timeout(wait) {
                    self.serve(command);
                }
                continue;
            }
            let started = Instant::now();
            self.tick_unix_ms = crate::base::clock::now_ms().max(0) as u64;
            let world_ms = base_ms + began.elapsed().as_millis() as u64;
            let report = self.shard.tick(world_ms);
            let took = started.elapsed();
            self.metrics.tick_seconds.observe(took.as_secs_f64());
            if took > period {
                self.metrics.late_ticks.inc();
            }
            self.metrics.arrivals.inc_by(report.arrivals.len() as u64);
            for arrival in &report.arrivals {
                if let Some(player) = self.shard.player_of(arrival.owner) {
                    let credit =
                        payouts::Credit::arrival(self.shard.id, Uuid::from_u128(player), arrival);
                    self.owe(credit);
                }
            }
            // Arrivals are owed once on disk (one sync for the tick's).
            self.flush_actions();
            self.metrics.kills.inc_by(report.kills);
            self.publish();
            // Each tick serves its share of the subscribers (each is served once a period).
            self.send_updates(self.shard.tick_no % self.aoi.every);
            next_tick += period;
            if next_tick < Instant::now() {
                // Too far behind: skip the ticks missed rather than run them back to back.
                next_tick = Instant::now() + period;
            }
            if spare.is_none() {
                spare = self.returned(writer.poll());
            }
            if Instant::now() >= next_checkpoint {
                next_checkpoint = Instant::now() + self.interval;
                // A write still in flight keeps the snapshot: this checkpoint waits for the next.
                if let Some(snapshot) = spare.take() {
                    spare = self.checkpoint(&writer, snapshot);
                }
            }
        }
        if !self.fence.holds() {
            // The lease is gone: another node may run the shard now, so nothing more is
            // written or acknowledged. Actions waiting for the log are refused; the commands
            // still queued are answered by their dropped replies.
            self.broken = true;
            self.flush_actions();
            if spare.is_none() {
                // The write in flight ends (written or refused by the fence); the log segments
                // stay whatever its outcome.
                let _ = writer.wait();
            }
            writer.finish();
            tracing::warn!(
                shard = self.shard.id,
                "world: shard stopped without a last checkpoint (its lease ended)"
            );
            return;
        }
        // The last checkpoint, written before the thread ends (actions still queued first).
        self.drain();
        let spare = match spare {
            Some(snapshot) => Some(snapshot),
            None => self.returned(writer.wait()),
        };
        if self
            .checkpoint(&writer, spare.unwrap_or_default())
            .is_none()
        {
            let _ = self.returned(writer.wait());
        }
        writer.finish();
        tracing::info!(
            shard = self.shard.id,
            "world: shard stopped after its last checkpoint"
        );
    }

    /// Copies the shard into `snapshot` (the pause) and hands it to the writer; the log starts
    /// a new segment, so that the ones this checkpoint covers can go once it is on disk.
    /// Gives the snapshot back when no checkpoint was written (the shard is broken).
    fn checkpoint(&mut self, writer: &Writer, mut snapshot: Snapshot) -> Option<Snapshot> {
        self.flush_actions();
        if self.broken {
            // The shard may hold what the disk does not: never write that as a checkpoint.
            return Some(snapshot);
        }
        let copy = Instant::now();
        self.shard.snapshot_into(&mut snapshot);
        self.metrics
            .checkpoint_pause_seconds
            .observe(copy.elapsed().as_secs_f64());
        self.covered = match self.log.rotate() {
            Ok(boundary) => Some(boundary),
            Err(error) => {
                tracing::warn!(%error, "world: cannot start a new log segment; the old ones stay");
                None
            }
        };
        // Credits still waiting for the database go again into the new segment: the segments
        // this checkpoint covers, which hold them now, will be deleted.
        if self.covered.is_some() {
            for credit in self.payouts.waiting_of(self.shard.id) {
                self.owe(credit);
            }
            self.flush_actions();
            if self.broken {
                return Some(snapshot);
            }
        }
        writer.write(snapshot);
        None
    }

    /// A snapshot back from the writer: when its write succeeded, the log segments it covers
    /// are deleted.
    fn returned(&mut self, written: Option<(Snapshot, bool)>) -> Option<Snapshot> {
        let (snapshot, ok) = written?;
        if let (true, Some(boundary)) = (ok, self.covered.take()) {
            self.log.forget_before(boundary);
        }
        Some(snapshot)
    }

    /// Handles `first` and every command already waiting, then syncs the actions they applied
    /// to the log (one sync for the batch) and acknowledges them.
    fn serve(&mut self, first: Command) {
        self.obey(first);
        self.drain();
    }

    /// Handles every command waiting, then syncs and acknowledges the actions they applied.
    fn drain(&mut self) {
        while let Ok(command) = self.commands.try_recv() {
            self.obey(command);
        }
        self.flush_actions();
    }

    /// Logs a credit the shard owes; it is handed to the payouts once on disk.
    fn owe(&mut self, credit: payouts::Credit) {
        let seq = self.log.next_seq();
        self.shard.applied = seq;
        let record = Record {
            seq,
            t: self.shard.now_ms,
            user: credit.user,
            action: Action::Credit(credit.clone()),
        };
        self.unlogged.push(Unlogged {
            record,
            then: Then::Pay(credit),
        });
    }

    fn flush_actions(&mut self) {
        if self.unlogged.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.unlogged);
        if !self.fence.holds() {
            // Applied here but never to be on disk: another node may run the shard now. Refused
            // (their credits are owed again by the node that runs it); the shard stops.
            self.broken = true;
            for unlogged in batch {
                if let Then::Answer(_, reply) = unlogged.then {
                    let _ = reply.send(Err(moving(self.shard.id)));
                }
            }
            return;
        }
        let records: Vec<Record> = batch.iter().map(|u| u.record.clone()).collect();
        let failure = match self.log.append(&records) {
            Ok(()) => {
                for unlogged in batch {
                    match unlogged.then {
                        Then::Answer(answer, reply) => {
                            self.metrics.actions.inc();
                            let _ = reply.send(Ok(answer));
                        }
                        Then::Pay(credit) => self.payouts.pay(credit),
                    }
                }
                return;
            }
            Err(failure) => failure,
        };
        tracing::error!(error = %failure.error, undone = failure.undone, shard = self.shard.id,
            "world: the action log cannot be written");
        self.metrics.log_failures.inc();
        // The batch is applied to the shard but not on disk: bring the shard back to what the
        // disk holds (its checkpoint and log), so that no refused action stays applied. (Its
        // credits are owed again when the creeps arrive again.)
        let message = if failure.undone && self.reload() {
            "The action could not be recorded, and was not applied; try again."
        } else {
            self.broken = true;
            tracing::error!(
                shard = self.shard.id,
                "world: the shard takes no more actions until the server restarts"
            );
            "The action could not be recorded and its outcome is unknown: the shard takes no \
             more actions until the server restarts."
        };
        for unlogged in batch {
            match unlogged.then {
                Then::Answer(_, reply) => {
                    let _ = reply.send(Err(RpcError::new(RpcCode::Unavailable, message)));
                }
                // Not on disk, and the creeps' arrival is undone with the shard (or, on a broken
                // shard, kept in memory to be paid: the best there is).
                Then::Pay(credit) if self.broken => self.payouts.pay(credit),
                Then::Pay(_) => {}
            }
        }
    }

    /// Replaces the shard with what its checkpoint and log hold, as a restart would; false
    /// when that cannot be read.
    fn reload(&mut self) -> bool {
        match super::load_or_seed(
            &self.config,
            &self.ground,
            &self.dir,
            self.shard.id as usize,
        ) {
            Ok(super::Loaded {
                shard,
                log,
                replayed,
                credits,
                ..
            }) => {
                for credit in credits {
                    self.payouts.pay(credit);
                }
                tracing::warn!(
                    shard = self.shard.id,
                    replayed,
                    "world: shard reloaded from its checkpoint and log after a failed append"
                );
                self.shard = shard;
                self.log = log;
                // The segments a checkpoint in flight covers go at the next one instead.
                self.covered = None;
                self.metrics.count_actors(&self.shard);
                true
            }
            Err(error) => {
                tracing::error!(%error, shard = self.shard.id, "world: the shard cannot be reloaded");
                false
            }
        }
    }

    fn obey(&mut self, command: Command) {
        match command {
            Command::Act { reply, .. } | Command::Routed { reply, .. } if self.broken => {
                let _ = reply.send(Err(broken_shard()));
            }
            Command::Quote { reply, .. } if self.broken => {
                let _ = reply.send(Err(broken_shard()));
            }
            Command::Quote {
                user,
                action,
                reply,
            } => {
                let quote = action
                    .cost(&self.shard, user.as_u128())
                    .map_err(|error| refusal(&error));
                let behind = matches!(action, Action::Spawn { .. })
                    && self.payouts.backlog() >= self.payouts.bound();
                let quote = match quote {
                    Ok(_) if behind => Err(RpcError::new(
                        RpcCode::Unavailable,
                        "The world's payments are behind: spawns resume once they catch up.",
                    )),
                    quote => quote,
                };
                let _ = reply.send(quote);
            }
            Command::Act {
                user,
                action,
                paid,
                reply,
            } => {
                match action.cost(&self.shard, user.as_u128()) {
                    Err(error) => return refuse(reply, &error),
                    Ok(cost) if cost != paid => {
                        let _ = reply.send(Err(RpcError::failed_precondition(format!(
                            "The action's price changed ({paid} to {cost}); what was paid is \
                             refunded. Try again."
                        ))));
                        return;
                    }
                    Ok(_) => {}
                }
                if let Action::Connect { from, to } = action {
                    let needed = actions::check_connect(&self.shard, user.as_u128(), from)
                        .and_then(|()| self.shard.route_needed(from, to));
                    match needed {
                        Err(error) => return refuse(reply, &error),
                        Ok(Some((a, b))) => return self.route(user, from, to, (a, b), reply),
                        Ok(None) => {}
                    }
                }
                let applied = action.apply(
                    &mut self.shard,
                    &self.ground.router,
                    &mut self.calc,
                    user.as_u128(),
                );
                self.applied(user, action, applied, reply);
            }
            Command::Routed {
                user,
                from,
                to,
                nodes,
                reply,
            } => {
                let applied =
                    actions::connect_routed(&mut self.shard, user.as_u128(), from, to, nodes);
                self.applied(user, Action::Connect { from, to }, applied, reply);
            }
            Command::Subscribe {
                sink,
                session_id: id,
                rect,
                reply,
            } => {
                let answer = match self.subscribers.get_mut(&id) {
                    Some(known) => known
                        .view
                        .move_to(rect, self.aoi.max_side)
                        .map(|()| next_state(&self.shard, &mut known.view, self.tick_unix_ms)),
                    None => View::new(rect, self.aoi.margin, self.aoi.max_side).map(|mut view| {
                        let state = next_state(&self.shard, &mut view, self.tick_unix_ms);
                        self.next_slot += 1;
                        let slot = self.next_slot;
                        self.subscribers.insert(id, Subscriber { sink, view, slot });
                        self.metrics.subscribers.inc();
                        state
                    }),
                };
                let _ = reply.send(answer.map_err(|e| e.to_string()));
            }
            Command::Unsubscribe { session_id } => {
                if self.subscribers.remove(&session_id).is_some() {
                    self.metrics.subscribers.dec();
                }
            }
            Command::DropNode { node } => {
                let before = self.subscribers.len();
                self.subscribers.retain(
                    |_, s| !matches!(&s.sink, Sink::Remote { node: n, .. } if **n == *node),
                );
                self.metrics
                    .subscribers
                    .sub((before - self.subscribers.len()) as i64);
            }
        }
    }

    /// An action's outcome: applied ones wait for the log's sync, refusals are answered now.
    fn applied(
        &mut self,
        user: Uuid,
        action: Action,
        applied: Result<serde_json::Value, muster_world::WorldError>,
        reply: tokio::sync::oneshot::Sender<Result<serde_json::Value, RpcError>>,
    ) {
        match applied {
            Ok(answer) => {
                let seq = self.log.next_seq();
                self.shard.applied = seq;
                let record = Record {
                    seq,
                    t: self.shard.now_ms,
                    user,
                    action,
                };
                self.unlogged.push(Unlogged {
                    record,
                    then: Then::Answer(answer, reply),
                });
            }
            Err(error) => refuse(reply, &error),
        }
    }

    /// Hands a connect's route to the routing queue; the route comes back to this shard's
    /// inbox. A full queue refuses the connect at once.
    fn route(
        &mut self,
        user: Uuid,
        from: u32,
        to: u32,
        (a, b): (u32, u32),
        reply: tokio::sync::oneshot::Sender<Result<serde_json::Value, RpcError>>,
    ) {
        let slot = Arc::new(parking_lot::Mutex::new(Some(reply)));
        let (inbox, waiting) = (self.own_inbox.clone(), slot.clone());
        let submitted = self.routes.submit(
            a,
            b,
            Box::new(move |nodes| {
                if let Some(reply) = waiting.lock().take() {
                    // Blocks the routing worker, not the shard, when the inbox is full.
                    let _ = inbox.send(Command::Routed {
                        user,
                        from,
                        to,
                        nodes,
                        reply,
                    });
                }
            }),
        );
        if let Err(error) = submitted {
            if let Some(reply) = slot.lock().take() {
                let _ = reply.send(Err(RpcError::new(
                    RpcCode::Unavailable,
                    format!("{error}."),
                )));
            }
        }
    }

    /// Queues the changes of the subscribers this tick serves (`slot % every == group`),
    /// skipping those who have not taken their last ones. The views are computed on up to as
    /// many threads as there are cores: they only read the shard.
    fn send_updates(&mut self, group: u64) {
        self.drain();
        let every = self.aoi.every;
        let mut due: Vec<(&Uuid, &mut Subscriber)> = self
            .subscribers
            .iter_mut()
            .filter(|(_, s)| s.slot % every == group)
            .collect();
        if due.is_empty() {
            return;
        }
        let (shard, metrics, tick_unix_ms) = (&self.shard, &self.metrics, self.tick_unix_ms);
        // Local sockets get their updates now; remote ones', encoded here, go to their nodes
        // afterwards, one message per node.
        let serve = |part: &mut [(&Uuid, &mut Subscriber)]| -> Served {
            let mut served = Served::default();
            for (id, subscriber) in part.iter_mut() {
                if !subscriber.sink.ready() {
                    metrics.states_skipped.inc();
                    continue;
                }
                let state = next_state(shard, &mut subscriber.view, tick_unix_ms);
                match &subscriber.sink {
                    Sink::Local(session) => {
                        let envelope = Envelope::new("", Message::WorldState(state));
                        if Encoded::new(envelope).deliver(session) {
                            metrics.states_sent.inc();
                        } else {
                            served.closed.push(**id);
                        }
                    }
                    Sink::Remote {
                        node,
                        session_id,
                        format,
                    } => {
                        metrics.states_sent.inc();
                        let envelope = Envelope::new("", Message::WorldState(state));
                        let frame = crate::session::codec::encode(*format, &envelope);
                        let entry = super::remote::ViewEntry::of(*session_id, shard.id, frame);
                        served.remote.push((node.clone(), entry));
                    }
                }
            }
            served
        };
        let threads = self.aoi.threads;
        let served: Vec<Served> = if threads < 2 || due.len() < 64 {
            vec![serve(&mut due)]
        } else {
            let chunk = due.len().div_ceil(threads);
            std::thread::scope(|scope| {
                let handles: Vec<_> = due
                    .chunks_mut(chunk)
                    .map(|part| scope.spawn(|| serve(part)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_default())
                    .collect()
            })
        };
        let mut batches: HashMap<Arc<str>, super::remote::ViewBatch> = HashMap::new();
        let mut closed = Vec::new();
        for part in served {
            closed.extend(part.closed);
            for (node, entry) in part.remote {
                batches.entry(node).or_default().push(entry);
            }
        }
        if let Some(out) = &self.views_out {
            for (node, batch) in batches {
                let topic = super::remote::view_topic(&node);
                for (bytes, views) in batch.into_frames() {
                    let message = super::remote::ViewMessage {
                        topic: topic.clone(),
                        bytes,
                    };
                    // NATS away or too slow: these views are skipped, not queued without end.
                    if out.try_send(message).is_err() {
                        self.metrics.states_skipped.inc_by(views as u64);
                    }
                }
            }
        }
        for id in closed {
            self.subscribers.remove(&id);
            self.metrics.subscribers.dec();
        }
    }

    fn publish(&self) {
        self.metrics.route_queue.set(self.routes.len() as i64);
        self.metrics.count_actors(&self.shard);
    }
}
