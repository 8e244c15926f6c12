//! The persistent world's domain (docs/world.md): shards of `muster_world` run on threads of
//! their own, ticking at the configured rate, checkpointed on an interval and at shutdown, and
//! restored (or seeded) at start.
//!
//! A shard's thread owns its state: nothing else touches it, so there is no lock on the hot
//! path. A checkpoint copies the shard into the snapshot it keeps (the only pause) and hands it
//! to the shard's writer thread, which writes it atomically and hands it back.
//!
//! The world's clock runs only while Muster runs: a restored shard resumes at its checkpoint's
//! time, so creeps do not jump ahead by the time the server was down.
//!
//! Areas of interest: a socket subscribes to a box of a shard; the shard's thread answers with
//! a snapshot and then, `aoi_hz` times a second, queues the changes on the socket's outbox —
//! only when the previous update has been taken (an outbox still holding something means a
//! slow client: the update is skipped, and the next one, computed against what the client was
//! last sent, carries the newest state). Subscriptions are this node's: the shard threads hold
//! the subscribed sessions, which are local.

pub mod actions;
pub mod log;
pub mod metrics;
pub mod payouts;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use muster_proto::realtime::{
    Envelope, Message, WorldCreep, WorldState, WorldSubscribe, WorldTower,
};
use muster_world::aoi::{Update, View};
use muster_world::geo::{Point, Rect};
use uuid::Uuid;

use crate::session::fanout::Encoded;
use crate::session::registry::SessionObserver;
use crate::session::Session;

use muster_world::checkpoint::Snapshot;
use muster_world::map::RoadMap;
use muster_world::routing::Router;
use muster_world::seed::{seed, SeedPlan};
use muster_world::shard::Shard;
use prometheus::Registry;
use rand::SeedableRng;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::base::config::WorldConfig;
use crate::functions::{RpcCode, RpcError};
use actions::Action;
use log::{ActionLog, Record};
use metrics::WorldMetrics;

/// One shard as the rest of Muster sees it: its counts, refreshed every tick.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardStats {
    pub shard: u32,
    pub tiles: usize,
    pub towers: usize,
    pub creeps: usize,
    pub routes: usize,
    pub tick_no: u64,
    pub now_ms: u64,
}

impl ShardStats {
    fn of(shard: &Shard) -> ShardStats {
        ShardStats {
            shard: shard.id,
            tiles: shard.tiles.len(),
            towers: shard.towers.len(),
            creeps: shard.creeps.alive(),
            routes: shard.routes.len(),
            tick_no: shard.tick_no,
            now_ms: shard.now_ms,
        }
    }
}

/// The running world.
pub struct World {
    threads: parking_lot::Mutex<Vec<std::thread::JoinHandle<()>>>,
    stats: Arc<parking_lot::Mutex<Vec<ShardStats>>>,
    /// Each shard thread's inbox.
    inboxes: Vec<mpsc::SyncSender<Command>>,
}

/// What a shard's thread is asked between ticks.
enum Command {
    /// Subscribe `session` to `rect` (or move its box); answered with the snapshot.
    Subscribe {
        session: Arc<Session>,
        rect: Rect,
        reply: tokio::sync::oneshot::Sender<Result<WorldState, String>>,
    },
    Unsubscribe {
        session_id: Uuid,
    },
    /// A route the routing queue computed for a player's `world_connect`.
    Routed {
        user: Uuid,
        from: u32,
        to: u32,
        nodes: Option<Vec<u32>>,
        reply: tokio::sync::oneshot::Sender<Result<serde_json::Value, RpcError>>,
    },
    /// A player's action; answered once it is applied and on disk (or refused).
    Act {
        user: Uuid,
        action: Action,
        reply: tokio::sync::oneshot::Sender<Result<serde_json::Value, RpcError>>,
    },
}

/// Commands a shard's inbox holds before a request is refused as busy.
const INBOX: usize = 4096;

/// One subscribed socket, on its shard's thread.
struct Subscriber {
    session: Arc<Session>,
    view: View,
    /// Which of the ticks of an update period serves it (subscribers are spread over them).
    slot: u64,
}

/// The map and its prepared router, shared by every shard.
pub struct Ground {
    pub map: Arc<RoadMap>,
    pub router: Arc<Router>,
}

impl Ground {
    /// Imports `config.map` and prepares its router.
    pub fn prepare(config: &WorldConfig) -> anyhow::Result<Ground> {
        let map = muster_world::map::osm::import(Path::new(&config.map))
            .map_err(|e| anyhow::anyhow!("world.map: {e}"))?;
        let router = Arc::new(Router::prepare(&map));
        Ok(Ground {
            map: Arc::new(map),
            router,
        })
    }
}

/// Where checkpoints go.
pub fn checkpoint_dir(config: &WorldConfig, data_dir: &Path) -> PathBuf {
    if config.checkpoint_dir.is_empty() {
        data_dir.join("world")
    } else {
        PathBuf::from(&config.checkpoint_dir)
    }
}

/// Shard `i`'s checkpoint file.
pub fn checkpoint_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("shard-{i}.world"))
}

/// Shard `i`: restored from its checkpoint when there is one, else new (seeded when the
/// configuration says so), then brought up to date with the actions logged after it. Returns
/// the shard, whether it was restored, its action log, and how many actions were replayed.
pub fn load_or_seed(
    config: &WorldConfig,
    ground: &Ground,
    dir: &Path,
    i: usize,
    now_ms: u64,
) -> anyhow::Result<(Shard, bool, ActionLog, usize)> {
    let path = checkpoint_path(dir, i);
    let (mut shard, restored) = if path.exists() {
        let snapshot = Snapshot::read(&path)?;
        let shard = Shard::restore(snapshot, ground.map.clone(), config.rules.clone())?;
        (shard, true)
    } else {
        (seeded(config, ground, i, now_ms), false)
    };
    let (log, records) = ActionLog::open(dir, i, shard.applied)
        .map_err(|e| anyhow::anyhow!("world action log in {}: {e}", dir.display()))?;
    let mut calc = ground.router.calculator();
    let replayed = records.len();
    for record in records {
        // Each action again at the time it was first applied (a spawn's creeps set off then).
        shard.now_ms = shard.now_ms.max(record.t);
        let _ = record
            .action
            .apply(&mut shard, &ground.router, &mut calc, record.user.as_u128());
        shard.applied = record.seq;
    }
    if replayed > 0 {
        tracing::info!(
            shard = i,
            replayed,
            "world: actions after the checkpoint replayed"
        );
    }
    Ok((shard, restored, log, replayed))
}

/// Shard `i`, new, seeded with NPCs when the configuration says so.
pub fn seeded(config: &WorldConfig, ground: &Ground, i: usize, now_ms: u64) -> Shard {
    let tiles = Shard::tile_layout(&ground.map, config.tiles_per_shard);
    let mut shard = Shard::new(i as u32, ground.map.clone(), tiles, config.rules.clone());
    shard.now_ms = now_ms;
    if config.seed_towers_per_shard > 0 || config.seed_towers_per_million > 0.0 {
        let cities = muster_world::map::cities::bundled();
        let city = &cities[i % cities.len()];
        let mut plan = SeedPlan::for_city(&shard, city, config.seed_towers_per_million);
        if config.seed_towers_per_million <= 0.0 {
            plan.towers = config.seed_towers_per_shard;
            plan.connections = plan.towers.div_ceil(8);
            plan.creeps = plan.towers * 2;
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(i as u64);
        seed(&mut shard, &ground.router, &plan, now_ms, &mut rng);
    }
    shard
}

impl World {
    /// Loads or seeds every shard and starts their threads; `None` when no map is configured.
    pub fn start(
        config: &WorldConfig,
        data_dir: &Path,
        registry: &Registry,
        economy: Arc<crate::economy::Economy>,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Option<Arc<World>>> {
        if !config.enabled() {
            return Ok(None);
        }
        let started = Instant::now();
        let ground = Arc::new(Ground::prepare(config)?);
        let dir = checkpoint_dir(config, data_dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| anyhow::anyhow!("world checkpoints in {}: {e}", dir.display()))?;
        let metrics = Arc::new(WorldMetrics::register(registry));
        let payouts = payouts::start(economy, config.reward_currency.clone(), metrics.clone());
        // Players' new routes are computed off the shard threads, behind a bounded queue.
        let routes = Arc::new(muster_world::routing::RouteQueue::start(
            ground.router.clone(),
            2,
            config.route_queue,
        ));
        let stats = Arc::new(parking_lot::Mutex::new(vec![
            ShardStats::default();
            config.shards
        ]));
        let mut threads = Vec::new();
        let mut inboxes = Vec::new();
        for i in 0..config.shards {
            let (shard, restored, log, _) = load_or_seed(config, &ground, &dir, i, 0)?;
            if restored {
                metrics.restored.inc();
            }
            tracing::info!(
                shard = i,
                restored,
                towers = shard.towers.len(),
                creeps = shard.creeps.alive(),
                "world: shard ready"
            );
            let counts = ShardStats::of(&shard);
            let label = i.to_string();
            metrics
                .towers
                .with_label_values(&[&label])
                .set(counts.towers as i64);
            metrics
                .creeps
                .with_label_values(&[&label])
                .set(counts.creeps as i64);
            stats.lock()[i] = counts;
            let (inbox, commands) = mpsc::sync_channel(INBOX);
            inboxes.push(inbox.clone());
            let run = ShardRun {
                aoi: Aoi {
                    every: ((config.rules.tick_hz / config.aoi_hz).round() as u64).max(1),
                    max_side: config.aoi_max_side_m,
                    margin: config.aoi_margin_m,
                },
                commands,
                subscribers: HashMap::new(),
                next_slot: 0,
                calc: ground.router.calculator(),
                routes: routes.clone(),
                own_inbox: inbox,
                payouts: payouts.clone(),
                ground: ground.clone(),
                log,
                unlogged: Vec::new(),
                covered: None,
                tick_unix_ms: 0,
                shard,
                path: checkpoint_path(&dir, i),
                interval: Duration::from_secs(config.checkpoint_interval_s),
                metrics: metrics.clone(),
                stats: stats.clone(),
                shutdown: shutdown.clone(),
            };
            let thread = std::thread::Builder::new()
                .name(format!("world-shard-{i}"))
                .spawn(move || run.run())?;
            threads.push(thread);
        }
        metrics.shards.set(config.shards as i64);
        tracing::info!(
            shards = config.shards,
            ms = started.elapsed().as_millis() as u64,
            "world: started"
        );
        Ok(Some(Arc::new(World {
            threads: parking_lot::Mutex::new(threads),
            stats,
            inboxes,
        })))
    }

    /// Every shard's counts as of its last tick.
    pub fn stats(&self) -> Vec<ShardStats> {
        self.stats.lock().clone()
    }

    /// Subscribes `session` to a box of a shard (or moves its box there); the answer is the
    /// box's snapshot, and changes follow on the session's outbox.
    pub async fn subscribe(
        &self,
        session: &Arc<Session>,
        request: &WorldSubscribe,
    ) -> Result<WorldState, String> {
        let inbox = self.inboxes.get(request.shard as usize).ok_or_else(|| {
            format!(
                "no shard {}: this world has {} (0 to {})",
                request.shard,
                self.inboxes.len(),
                self.inboxes.len() - 1
            )
        })?;
        let rect = Rect {
            min: Point::new(request.min_x, request.min_y),
            max: Point::new(request.max_x, request.max_y),
        };
        // A session watches one box: leaving any other shard it watched.
        for (i, other) in self.inboxes.iter().enumerate() {
            if i != request.shard as usize {
                let _ = other.try_send(Command::Unsubscribe {
                    session_id: session.session_id,
                });
            }
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        inbox
            .try_send(Command::Subscribe {
                session: session.clone(),
                rect,
                reply,
            })
            .map_err(|_| "the world is busy; try again shortly".to_string())?;
        answer
            .await
            .map_err(|_| "the world is shutting down".to_string())?
    }

    /// Applies `action` of player `user` on shard `shard`; the answer once it is on disk.
    pub async fn act(
        &self,
        shard: u32,
        user: Uuid,
        action: Action,
    ) -> Result<serde_json::Value, RpcError> {
        let inbox = self.inboxes.get(shard as usize).ok_or_else(|| {
            RpcError::new(
                RpcCode::NotFound,
                format!("No shard {shard}: this world has {}.", self.inboxes.len()),
            )
        })?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        inbox
            .try_send(Command::Act {
                user,
                action,
                reply,
            })
            .map_err(|_| {
                RpcError::new(
                    RpcCode::Unavailable,
                    "The world is busy; try again shortly.",
                )
            })?;
        answer
            .await
            .map_err(|_| RpcError::new(RpcCode::Unavailable, "The world is shutting down."))?
    }

    /// Ends `session_id`'s subscription, wherever it is.
    pub fn unsubscribe(&self, session_id: Uuid) {
        for inbox in &self.inboxes {
            // A full inbox drops this; the shard also drops a subscriber whose socket closed.
            let _ = inbox.try_send(Command::Unsubscribe { session_id });
        }
    }

    /// Waits for every shard to write its last checkpoint and stop, once the shutdown token
    /// has fired. Blocking: call it from a blocking context.
    pub fn stop(&self) {
        let threads = std::mem::take(&mut *self.threads.lock());
        for thread in threads {
            let _ = thread.join();
        }
    }
}

/// What the offline commands start from: the prepared map and the checkpoint directory.
fn offline(config: &WorldConfig, data_dir: &Path) -> anyhow::Result<(Ground, PathBuf)> {
    anyhow::ensure!(config.enabled(), "world.map is not set: there is no world");
    let ground = Ground::prepare(config)?;
    let dir = checkpoint_dir(config, data_dir);
    std::fs::create_dir_all(&dir)?;
    Ok((ground, dir))
}

/// `muster world seed`: seeds every shard per the configuration and writes its checkpoint,
/// without serving; refuses to replace existing checkpoints unless `force` (which also deletes
/// the replaced world's action log: its actions belong to the old world).
pub fn seed_offline(
    config: &WorldConfig,
    data_dir: &Path,
    force: bool,
) -> anyhow::Result<serde_json::Value> {
    let started = Instant::now();
    let (ground, dir) = offline(config, data_dir)?;
    let mut shards = Vec::new();
    for i in 0..config.shards {
        let path = checkpoint_path(&dir, i);
        anyhow::ensure!(
            force || !path.exists(),
            "{} exists: the world is already seeded (--force replaces it)",
            path.display()
        );
        // Written over any previous checkpoint in one atomic rename.
        let shard = seeded(config, &ground, i, 0);
        let bytes = shard.snapshot().write(&path)?;
        log::remove_all(&dir, i)?;
        let mut stats = serde_json::to_value(ShardStats::of(&shard))?;
        stats["checkpointBytes"] = bytes.into();
        let cities = muster_world::map::cities::bundled();
        stats["city"] = cities[i % cities.len()].name.clone().into();
        shards.push(stats);
    }
    Ok(serde_json::json!({
        "checkpointDir": dir,
        "roadNodes": ground.map.nodes.len(),
        "buildingsPerTile": ground.map.buildings.len(),
        "shards": shards,
        "ms": started.elapsed().as_millis() as u64,
    }))
}

/// `muster world checkpoint`: with the server stopped, folds each shard's action log into a
/// new checkpoint (restore, replay, write) and deletes the log segments it covers.
pub fn checkpoint_offline(
    config: &WorldConfig,
    data_dir: &Path,
) -> anyhow::Result<serde_json::Value> {
    let started = Instant::now();
    let (ground, dir) = offline(config, data_dir)?;
    let mut shards = Vec::new();
    for i in 0..config.shards {
        let (shard, restored, mut log, replayed) = load_or_seed(config, &ground, &dir, i, 0)?;
        let bytes = shard.snapshot().write(&checkpoint_path(&dir, i))?;
        let boundary = log.rotate()?;
        log.forget_before(boundary);
        let mut stats = serde_json::to_value(ShardStats::of(&shard))?;
        stats["restored"] = restored.into();
        stats["actionsReplayed"] = replayed.into();
        stats["checkpointBytes"] = bytes.into();
        shards.push(stats);
    }
    Ok(serde_json::json!({
        "checkpointDir": dir,
        "shards": shards,
        "ms": started.elapsed().as_millis() as u64,
    }))
}

/// `muster world stats`: what each shard's checkpoint holds (read and checked, not restored).
pub fn stats_offline(config: &WorldConfig, data_dir: &Path) -> anyhow::Result<serde_json::Value> {
    let dir = checkpoint_dir(config, data_dir);
    let mut shards = Vec::new();
    for i in 0..config.shards {
        let path = checkpoint_path(&dir, i);
        if !path.exists() {
            shards.push(serde_json::json!({"shard": i, "checkpoint": null}));
            continue;
        }
        let bytes = std::fs::metadata(&path)?.len();
        let snapshot = Snapshot::read(&path)?;
        let (tiles, towers, creeps, routes) = snapshot.counts();
        shards.push(serde_json::json!({
            "shard": i, "checkpoint": path, "checkpointBytes": bytes, "tiles": tiles,
            "towers": towers, "creeps": creeps, "routes": routes,
            "tickNo": snapshot.tick_no, "nowMs": snapshot.now_ms,
        }));
    }
    Ok(serde_json::json!({ "checkpointDir": dir, "shards": shards }))
}

impl SessionObserver for World {
    fn session_closed(&self, session: &Arc<Session>) {
        self.unsubscribe(session.session_id);
    }
}

/// How a shard serves areas of interest.
struct Aoi {
    /// Ticks between two updates.
    every: u64,
    max_side: f32,
    margin: f32,
}

/// A view's update as the wire carries it; `tick_unix_ms` when its tick began.
fn to_state(shard: u32, update: Update, tick_unix_ms: u64) -> WorldState {
    WorldState {
        shard,
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

/// An action applied and waiting for the log's sync before it is acknowledged.
type Unlogged = (
    Record,
    serde_json::Value,
    tokio::sync::oneshot::Sender<Result<serde_json::Value, RpcError>>,
);

/// Answers a refused action with its reason.
fn refuse(
    reply: tokio::sync::oneshot::Sender<Result<serde_json::Value, RpcError>>,
    error: &muster_world::WorldError,
) {
    let _ = reply.send(Err(RpcError::new(
        actions::code_of(error),
        format!("{error}."),
    )));
}

/// What a shard's thread owns.
struct ShardRun {
    aoi: Aoi,
    /// When the last tick began, Unix ms (carried in world states).
    tick_unix_ms: u64,
    /// Where players' arrivals go to be paid.
    payouts: payouts::Payouts,
    /// The routing queue, and this shard's own inbox, where its routed connects come back.
    routes: Arc<muster_world::routing::RouteQueue>,
    own_inbox: mpsc::SyncSender<Command>,
    ground: Arc<Ground>,
    calc: muster_world::routing::PathCalculator,
    log: ActionLog,
    /// Actions applied since the last sync of the log.
    unlogged: Vec<Unlogged>,
    /// The log's first sequence number after the checkpoint being written: once it is on disk,
    /// the segments before are deleted.
    covered: Option<u64>,
    commands: mpsc::Receiver<Command>,
    subscribers: HashMap<Uuid, Subscriber>,
    /// The last slot given to a subscriber.
    next_slot: u64,
    shard: Shard,
    path: PathBuf,
    interval: Duration,
    metrics: Arc<WorldMetrics>,
    stats: Arc<parking_lot::Mutex<Vec<ShardStats>>>,
    shutdown: CancellationToken,
}

impl ShardRun {
    fn run(mut self) {
        let period = Duration::from_secs_f64(1.0 / f64::from(self.shard.rules.tick_hz));
        // The shard's clock resumes where its checkpoint left it.
        let base_ms = self.shard.now_ms;
        let began = Instant::now();
        let writer = Writer::start(self.path.clone(), self.shard.id, self.metrics.clone());
        // The snapshot this shard checkpoints into; `None` while its write is in flight.
        let mut spare = Some(Snapshot::default());
        let mut next_checkpoint = Instant::now() + self.interval;
        let mut next_tick = Instant::now() + period;
        let label = self.shard.id.to_string();
        while !self.shutdown.is_cancelled() {
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
                    self.payouts
                        .pay(self.shard.id, Uuid::from_u128(player), arrival);
                }
            }
            self.metrics.kills.inc_by(report.kills);
            self.publish(&label);
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
                    self.checkpoint(&writer, snapshot);
                }
            }
        }
        // The last checkpoint, written before the thread ends (actions still queued first).
        while let Ok(command) = self.commands.try_recv() {
            self.obey(command);
        }
        self.flush_actions();
        let spare = match spare {
            Some(snapshot) => Some(snapshot),
            None => self.returned(writer.wait()),
        };
        self.checkpoint(&writer, spare.unwrap_or_default());
        let _ = self.returned(writer.wait());
        writer.finish();
        tracing::info!(
            shard = self.shard.id,
            "world: shard stopped after its last checkpoint"
        );
    }

    /// Copies the shard into `snapshot` (the pause) and hands it to the writer; the log starts
    /// a new segment, so that the ones this checkpoint covers can go once it is on disk.
    fn checkpoint(&mut self, writer: &Writer, mut snapshot: Snapshot) {
        self.flush_actions();
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
        writer.write(snapshot);
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
        while let Ok(command) = self.commands.try_recv() {
            self.obey(command);
        }
        self.flush_actions();
    }

    fn flush_actions(&mut self) {
        if self.unlogged.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.unlogged);
        let records: Vec<Record> = batch.iter().map(|(r, _, _)| r.clone()).collect();
        match self.log.append(&records) {
            Ok(()) => {
                self.metrics.actions.inc_by(batch.len() as u64);
                for (_, answer, reply) in batch {
                    let _ = reply.send(Ok(answer));
                }
            }
            Err(error) => {
                // Applied but not on disk: not acknowledged. (The shard keeps it; a restart
                // would not have it.)
                tracing::error!(%error, shard = self.shard.id, "world: the action log cannot be written");
                for (_, _, reply) in batch {
                    let _ = reply.send(Err(RpcError::new(
                        RpcCode::Unavailable,
                        "The action could not be recorded; try again.",
                    )));
                }
            }
        }
    }

    fn obey(&mut self, command: Command) {
        match command {
            Command::Act {
                user,
                action,
                reply,
            } => {
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
                session,
                rect,
                reply,
            } => {
                let id = session.session_id;
                let answer = match self.subscribers.get_mut(&id) {
                    Some(known) => known.view.move_to(rect, self.aoi.max_side).map(|()| {
                        to_state(
                            self.shard.id,
                            known.view.update(&self.shard),
                            self.tick_unix_ms,
                        )
                    }),
                    None => View::new(rect, self.aoi.margin, self.aoi.max_side).map(|mut view| {
                        let state =
                            to_state(self.shard.id, view.update(&self.shard), self.tick_unix_ms);
                        self.next_slot += 1;
                        let slot = self.next_slot;
                        self.subscribers.insert(
                            id,
                            Subscriber {
                                session,
                                view,
                                slot,
                            },
                        );
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
                self.unlogged.push((record, answer, reply));
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
        while let Ok(command) = self.commands.try_recv() {
            self.obey(command);
        }
        self.flush_actions();
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
        let serve = |part: &mut [(&Uuid, &mut Subscriber)]| -> Vec<Uuid> {
            let mut closed = Vec::new();
            for (id, subscriber) in part.iter_mut() {
                if !subscriber.session.outbox.is_empty() {
                    metrics.states_skipped.inc();
                    continue;
                }
                let state = to_state(shard.id, subscriber.view.update(shard), tick_unix_ms);
                let envelope = Envelope::new("", Message::WorldState(state));
                if Encoded::new(envelope).deliver(&subscriber.session) {
                    metrics.states_sent.inc();
                } else {
                    closed.push(**id);
                }
            }
            closed
        };
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let closed: Vec<Uuid> = if threads < 2 || due.len() < 64 {
            serve(&mut due)
        } else {
            let chunk = due.len().div_ceil(threads);
            std::thread::scope(|scope| {
                let handles: Vec<_> = due
                    .chunks_mut(chunk)
                    .map(|part| scope.spawn(|| serve(part)))
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().unwrap_or_default())
                    .collect()
            })
        };
        for id in closed {
            self.subscribers.remove(&id);
            self.metrics.subscribers.dec();
        }
    }

    fn publish(&self, label: &str) {
        self.metrics.route_queue.set(self.routes.len() as i64);
        let stats = ShardStats::of(&self.shard);
        self.metrics
            .towers
            .with_label_values(&[label])
            .set(stats.towers as i64);
        self.metrics
            .creeps
            .with_label_values(&[label])
            .set(stats.creeps as i64);
        if let Some(slot) = self.stats.lock().get_mut(self.shard.id as usize) {
            *slot = stats;
        }
    }
}

/// A shard's checkpoint writer: a thread that writes the snapshot it is given and gives it
/// back for reuse (one write in flight at a time: the shard has one snapshot).
struct Writer {
    to_write: Option<mpsc::Sender<Snapshot>>,
    written: mpsc::Receiver<(Snapshot, Result<u64, String>, Duration)>,
    thread: Option<std::thread::JoinHandle<()>>,
    metrics: Arc<WorldMetrics>,
}

impl Writer {
    fn start(path: PathBuf, shard: u32, metrics: Arc<WorldMetrics>) -> Writer {
        let (to_write, inbox) = mpsc::channel::<Snapshot>();
        let (done, written) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("world-writer-{shard}"))
            .spawn(move || {
                for snapshot in inbox {
                    let started = Instant::now();
                    let result = snapshot.write(&path).map_err(|e| e.to_string());
                    if done.send((snapshot, result, started.elapsed())).is_err() {
                        return;
                    }
                }
            })
            .expect("spawn a world checkpoint writer");
        Writer {
            to_write: Some(to_write),
            written,
            thread: Some(thread),
            metrics,
        }
    }

    fn write(&self, snapshot: Snapshot) {
        if let Some(tx) = &self.to_write {
            let _ = tx.send(snapshot);
        }
    }

    /// The snapshot back, and whether it was written, if its write has finished (no waiting).
    fn poll(&self) -> Option<(Snapshot, bool)> {
        self.written.try_recv().ok().map(|r| self.record(r))
    }

    /// Waits for the write in flight and gives its snapshot back, and whether it was written.
    fn wait(&self) -> Option<(Snapshot, bool)> {
        self.written.recv().ok().map(|r| self.record(r))
    }

    fn record(
        &self,
        (snapshot, result, took): (Snapshot, Result<u64, String>, Duration),
    ) -> (Snapshot, bool) {
        let ok = match result {
            Ok(bytes) => {
                self.metrics.checkpoint_bytes.set(bytes as i64);
                self.metrics.checkpoint_seconds.observe(took.as_secs_f64());
                self.metrics.checkpoints.with_label_values(&["ok"]).inc();
                true
            }
            Err(why) => {
                tracing::error!(%why, "world: checkpoint failed; the previous one is intact");
                self.metrics
                    .checkpoints
                    .with_label_values(&["failed"])
                    .inc();
                false
            }
        };
        (snapshot, ok)
    }

    /// Stops the thread once what was sent is written.
    fn finish(mut self) {
        self.to_write.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
