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
//! last sent, carries the newest state).
//!
//! On a cluster (the `cluster` module) each shard runs on the one node holding its lease, and moves
//! between nodes; subscriptions and actions for a shard run elsewhere go to its node over NATS.

pub mod config;
pub(crate) mod postgres;
pub mod store;

pub(crate) mod actions;
mod cluster;
mod fence;
pub(crate) mod log;
pub(crate) mod metrics;
mod offline;
pub(crate) mod payouts;
mod remote;
mod runner;
mod writer;

pub use offline::{checkpoint_offline, seed_offline, stats_offline};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use muster_proto::realtime::{WorldState, WorldSubscribe};
use muster_world::geo::{Point, Rect};
use uuid::Uuid;

use crate::session::registry::SessionObserver;
use crate::session::Session;

use muster_world::checkpoint::Snapshot;
use muster_world::map::cities::City;
use muster_world::map::RoadMap;
use muster_world::routing::Router;
use muster_world::seed::{seed, SeedPlan};
use muster_world::shard::Shard;
use prometheus::Registry;
use rand::SeedableRng;
use tokio_util::sync::CancellationToken;

use crate::base::rpc::{RpcCode, RpcError};
use crate::world::config::WorldConfig;
use actions::Action;
use fence::Fence;
use log::ActionLog;
use metrics::WorldMetrics;
use runner::{Aoi, ShardRun, Sink};

/// The running world.
pub struct World {
    config: WorldConfig,
    ground: Arc<Ground>,
    /// Where checkpoints and action logs are (in a clustered world, a volume every node mounts).
    dir: PathBuf,
    metrics: Arc<WorldMetrics>,
    /// Players' new routes, computed off the shard threads behind a bounded queue.
    routes: Arc<muster_world::routing::RouteQueue>,
    /// This machine's cores: the threads that compute a tick's views, and that load shards at
    /// start.
    cores: usize,
    shutdown: CancellationToken,
    /// The shards this node runs, by number (`None`: another node runs it, or none yet).
    running: parking_lot::RwLock<Vec<Option<Arc<Running>>>>,
    /// Where actions are paid for, in `currency`.
    economy: Arc<crate::economy::Economy>,
    currency: String,
    /// Credits owed (arrivals, refunds of actions paid for but not applied).
    payouts: Arc<payouts::Payouts>,
    /// Actions per player per second.
    limit: crate::base::ratelimit::KeyedLimit<Uuid>,
    /// A clustered world's part: leases, the other nodes, remote subscriptions.
    cluster: Option<cluster::WorldCluster>,
    /// Held while the shards are being stopped: a second caller of [`World::stop`] waits for
    /// the first.
    stopping: parking_lot::Mutex<()>,
}

/// A shard this node runs: its thread and how to reach and stop it.
struct Running {
    inbox: mpsc::SyncSender<Command>,
    thread: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
    stop: CancellationToken,
    fence: Arc<Fence>,
    /// The task answering the other nodes' requests for this shard (a clustered world).
    serving: parking_lot::Mutex<Option<tokio::task::AbortHandle>>,
}

/// What a shard's thread is asked between ticks.
enum Command {
    /// Subscribe a socket to `rect` (or move its box); answered with the snapshot.
    Subscribe {
        sink: Sink,
        session_id: Uuid,
        rect: Rect,
        reply: tokio::sync::oneshot::Sender<Result<WorldState, String>>,
    },
    Unsubscribe {
        session_id: Uuid,
    },
    /// Node `node` left the cluster: its sockets' subscriptions go.
    DropNode {
        node: String,
    },
    /// A route the routing queue computed for a player's `world_connect`.
    Routed {
        user: Uuid,
        from: u32,
        to: u32,
        nodes: Option<Vec<u32>>,
        reply: tokio::sync::oneshot::Sender<Result<serde_json::Value, RpcError>>,
    },
    /// What a player's action would cost, or why it would be refused (nothing changes).
    Quote {
        user: Uuid,
        action: Action,
        reply: tokio::sync::oneshot::Sender<Result<u64, RpcError>>,
    },
    /// A player's action, `paid` for (its quote); answered once it is applied and on disk (or
    /// refused: then what was paid is refunded).
    Act {
        user: Uuid,
        action: Action,
        paid: u64,
        reply: tokio::sync::oneshot::Sender<Result<serde_json::Value, RpcError>>,
    },
}

/// Commands a shard's inbox holds before a request is refused as busy.
const INBOX: usize = 4096;

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
/// configuration says so), then brought up to date with the actions logged after it.
pub fn load_or_seed(
    config: &WorldConfig,
    ground: &Ground,
    dir: &Path,
    i: usize,
) -> anyhow::Result<Loaded> {
    let path = checkpoint_path(dir, i);
    let (mut shard, restored) = if path.exists() {
        let snapshot = Snapshot::read(&path)?;
        let shard = Shard::restore(snapshot, ground.map.clone(), config.rules.clone())?;
        (shard, true)
    } else {
        (seeded(config, ground, i), false)
    };
    let (log, records) = ActionLog::open(dir, i, shard.applied)
        .map_err(|e| anyhow::anyhow!("world action log in {}: {e}", dir.display()))?;
    for damage in log.damage() {
        if damage.tail {
            tracing::warn!(segment = %damage.segment.display(), offset = damage.offset,
                bytes = damage.bytes, "world: a torn record at the end of the action log (a crash mid-append, never acknowledged) was cut off");
        } else {
            tracing::error!(segment = %damage.segment.display(), offset = damage.offset,
                bytes = damage.bytes, "world: bad bytes in the middle of the action log; the records after them were read");
        }
    }
    let mut calc = ground.router.calculator();
    let replayed = records.len();
    let mut credits = Vec::new();
    for record in records {
        if let Action::Credit(credit) = record.action {
            // Owed, maybe not paid yet: paid once, whatever the replay.
            credits.push(credit);
            shard.applied = record.seq;
            continue;
        }
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
    Ok(Loaded {
        shard,
        restored,
        log,
        replayed,
        credits,
    })
}

/// A shard as [`load_or_seed`] brings it back.
pub struct Loaded {
    pub shard: Shard,
    /// Whether it came from a checkpoint (else it is new).
    pub restored: bool,
    pub log: ActionLog,
    /// Records replayed from the log.
    pub replayed: usize,
    /// Credits the log holds (to hand to the payouts again).
    pub credits: Vec<payouts::Credit>,
}

/// The bundled city shard `i` is seeded around: the `i`th, round the list again past its end.
pub fn seed_city(i: usize) -> City {
    let mut cities = muster_world::map::cities::bundled();
    let n = cities.len();
    cities.swap_remove(i % n)
}

/// Shard `i`, new (its clock at 0), seeded with NPCs when the configuration says so.
pub fn seeded(config: &WorldConfig, ground: &Ground, i: usize) -> Shard {
    let tiles = Shard::tile_layout(&ground.map, config.tiles_per_shard);
    let mut shard = Shard::new(i as u32, ground.map.clone(), tiles, config.rules.clone());
    if config.seed_towers_per_shard > 0 || config.seed_towers_per_million > 0.0 {
        let mut plan = SeedPlan::for_city(&shard, &seed_city(i), config.seed_towers_per_million);
        if config.seed_towers_per_million <= 0.0 {
            plan.towers = config.seed_towers_per_shard;
            plan.connections = plan.towers.div_ceil(8);
            plan.creeps = plan.towers * 2;
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(i as u64);
        seed(&mut shard, &ground.router, &plan, 0, &mut rng);
    }
    shard
}

/// What a clustered world needs of the cluster.
pub struct ClusterSeat {
    pub bus: crate::cluster::bus::Bus,
    pub leases: Arc<dyn crate::world::store::WorldLeaseStore>,
    /// How long to wait after start before taking shards, so that the other nodes are known.
    pub settle: Duration,
}

impl World {
    /// Starts the world; `None` when no map is configured. On one node every shard is loaded or
    /// seeded and started now; in a cluster (`seat`) the shards are taken as their leases allow
    /// (docs/world.md, "A world on several nodes").
    pub async fn start(
        config: &WorldConfig,
        data_dir: &Path,
        registry: &Registry,
        economy: Arc<crate::economy::Economy>,
        shutdown: CancellationToken,
        seat: Option<ClusterSeat>,
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
        let payouts = payouts::Payouts::start(
            economy.clone(),
            config.reward_currency.clone(),
            config.max_waiting_credits,
            metrics.clone(),
        );
        let routes = Arc::new(muster_world::routing::RouteQueue::start(
            ground.router.clone(),
            2,
            config.route_queue,
        ));
        let cluster = match seat {
            Some(seat) => {
                cluster::check_volume(&dir, seat.leases.as_ref()).await?;
                Some(cluster::WorldCluster::new(seat, config))
            }
            None => None,
        };
        let world = Arc::new(World {
            config: config.clone(),
            ground,
            dir,
            metrics,
            routes,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            shutdown,
            running: parking_lot::RwLock::new((0..config.shards).map(|_| None).collect()),
            economy,
            currency: config.reward_currency.clone(),
            payouts,
            limit: crate::base::ratelimit::KeyedLimit::new(
                config.actions_per_sec,
                config.action_burst,
            ),
            cluster,
            stopping: parking_lot::Mutex::new(()),
        });
        if world.cluster.is_some() {
            cluster::start(&world).await?;
            tracing::info!(
                shards = config.shards,
                "world: clustered; shards are taken as their leases allow"
            );
            return Ok(Some(world));
        }
        for (i, loaded) in world.load_all()?.into_iter().enumerate() {
            world.start_shard(i, loaded, Arc::new(Fence::forever()))?;
        }
        tracing::info!(
            shards = config.shards,
            ms = started.elapsed().as_millis() as u64,
            "world: started"
        );
        Ok(Some(world))
    }

    /// Loads (or seeds) shard `i` and starts its thread, which runs while `fence` holds.
    /// Blocking: it reads the checkpoint and replays the log.
    fn run_shard(&self, i: usize, fence: Arc<Fence>) -> anyhow::Result<()> {
        let loaded = load_or_seed(&self.config, &self.ground, &self.dir, i)?;
        self.start_shard(i, loaded, fence)
    }

    /// Every shard loaded (or seeded), on as many threads as there are cores: a restore is
    /// memory-bound work on one core, so a world of several shards comes back in about
    /// `shards / cores` restores' time rather than `shards`. Blocking.
    fn load_all(&self) -> anyhow::Result<Vec<Loaded>> {
        let shards = self.config.shards;
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut loaded: Vec<(usize, anyhow::Result<Loaded>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..self.cores.min(shards))
                .map(|_| {
                    scope.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            if i >= shards {
                                return done;
                            }
                            done.push((i, load_or_seed(&self.config, &self.ground, &self.dir, i)));
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_default())
                .collect()
        });
        anyhow::ensure!(
            loaded.len() == shards,
            "world: a thread loading shards panicked"
        );
        loaded.sort_by_key(|(i, _)| *i);
        loaded.into_iter().map(|(_, l)| l).collect()
    }

    /// Starts shard `i`, as `loaded` brought it back, on its thread, which runs while `fence`
    /// holds.
    fn start_shard(&self, i: usize, loaded: Loaded, fence: Arc<Fence>) -> anyhow::Result<()> {
        let config = &self.config;
        let Loaded {
            shard,
            restored,
            log,
            credits,
            ..
        } = loaded;
        for credit in credits {
            self.payouts.pay(credit);
        }
        if restored {
            self.metrics.restored.inc();
        }
        for damage in log.damage() {
            let kind = if damage.tail { "torn_tail" } else { "middle" };
            self.metrics.log_damage.with_label_values(&[kind]).inc();
        }
        tracing::info!(
            shard = i,
            restored,
            towers = shard.towers.len(),
            creeps = shard.creeps.alive(),
            "world: shard ready"
        );
        self.metrics.count_actors(&shard);
        let (inbox, commands) = mpsc::sync_channel(INBOX);
        let stop = self.shutdown.child_token();
        let run = ShardRun {
            aoi: Aoi {
                every: ((config.rules.tick_hz / config.aoi_hz).round() as u64).max(1),
                max_side: config.aoi_max_side_m,
                margin: config.aoi_margin_m,
                threads: self.cores,
            },
            commands,
            subscribers: HashMap::new(),
            next_slot: 0,
            calc: self.ground.router.calculator(),
            routes: self.routes.clone(),
            own_inbox: inbox.clone(),
            payouts: self.payouts.clone(),
            ground: self.ground.clone(),
            log,
            config: config.clone(),
            dir: self.dir.clone(),
            broken: false,
            unlogged: Vec::new(),
            covered: None,
            tick_unix_ms: 0,
            shard,
            path: checkpoint_path(&self.dir, i),
            interval: Duration::from_secs(config.checkpoint_interval_s),
            metrics: self.metrics.clone(),
            stop: stop.clone(),
            fence: fence.clone(),
            views_out: self.cluster.as_ref().map(|c| c.views_out.clone()),
        };
        let thread = std::thread::Builder::new()
            .name(format!("world-shard-{i}"))
            .spawn(move || run.run())?;
        let running = Arc::new(Running {
            inbox,
            thread: parking_lot::Mutex::new(Some(thread)),
            stop,
            fence,
            serving: parking_lot::Mutex::new(None),
        });
        let mut table = self.running.write();
        table[i] = Some(running);
        self.count_running(&table);
        Ok(())
    }

    fn count_running(&self, table: &[Option<Arc<Running>>]) {
        let running = table.iter().filter(|r| r.is_some()).count();
        self.metrics.shards.set(running as i64);
    }

    /// Stops shard `i` here, after a last checkpoint when `checkpoint` (a handover) or at once
    /// (its lease was lost), and waits for its thread. Blocking.
    fn stop_shard(&self, i: usize, checkpoint: bool) {
        let running = {
            let mut table = self.running.write();
            let running = table.get_mut(i).and_then(Option::take);
            self.count_running(&table);
            running
        };
        let Some(running) = running else {
            return;
        };
        if let Some(serving) = running.serving.lock().take() {
            serving.abort();
        }
        if !checkpoint {
            running.fence.revoke();
        }
        running.stop.cancel();
        if let Some(thread) = running.thread.lock().take() {
            let _ = thread.join();
        }
        self.metrics.forget(i as u32);
    }

    /// Shard `i`'s inbox, when this node runs it.
    fn inbox(&self, i: usize) -> Option<mpsc::SyncSender<Command>> {
        self.running
            .read()
            .get(i)
            .and_then(|r| r.as_ref().map(|r| r.inbox.clone()))
    }

    fn no_shard(&self, shard: u32) -> String {
        format!(
            "no shard {shard}: this world has {} (0 to {})",
            self.config.shards,
            self.config.shards - 1
        )
    }

    /// Subscribes `session` to a box of a shard (or moves its box there); the answer is the
    /// box's snapshot, and changes follow on the session's outbox. In a clustered world the
    /// shard may run on another node: the request goes there, and so does a subscription
    /// again when the shard moves (with a fresh snapshot).
    pub async fn subscribe(
        &self,
        session: &Arc<Session>,
        request: &WorldSubscribe,
    ) -> Result<WorldState, String> {
        let shard = request.shard as usize;
        if shard >= self.config.shards {
            return Err(self.no_shard(request.shard));
        }
        // A session watches one box: leaving any other shard it watched.
        self.leave(session.session_id, Some(shard));
        if let Some(cluster) = &self.cluster {
            if let Some(before) = cluster.watch(session, request) {
                if before != request.shard && self.inbox(before as usize).is_none() {
                    cluster.unsubscribe_remote(before, session.session_id);
                }
            }
        }
        let answer = self.subscribe_at(session, request).await;
        if answer.is_err() {
            if let Some(cluster) = &self.cluster {
                cluster.unwatch(session.session_id);
            }
        }
        answer
    }

    /// Subscribes `session` where its shard runs: here, or on its owner.
    async fn subscribe_at(
        &self,
        session: &Arc<Session>,
        request: &WorldSubscribe,
    ) -> Result<WorldState, String> {
        let rect = Rect {
            min: Point::new(request.min_x, request.min_y),
            max: Point::new(request.max_x, request.max_y),
        };
        match (self.inbox(request.shard as usize), &self.cluster) {
            (Some(inbox), _) => {
                self.subscribe_here(
                    &inbox,
                    Sink::Local(session.clone()),
                    session.session_id,
                    rect,
                )
                .await
            }
            (None, Some(cluster)) => {
                cluster
                    .subscribe_remote(
                        request.shard,
                        session.session_id,
                        session.format,
                        rect,
                        &self.metrics,
                    )
                    .await
            }
            (None, None) => Err(self.no_shard(request.shard)),
        }
    }

    /// Subscribes `sink` to `rect` of the shard of `inbox`.
    async fn subscribe_here(
        &self,
        inbox: &mpsc::SyncSender<Command>,
        sink: Sink,
        session_id: Uuid,
        rect: Rect,
    ) -> Result<WorldState, String> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        inbox
            .try_send(Command::Subscribe {
                sink,
                session_id,
                rect,
                reply,
            })
            .map_err(|_| "the world is busy; try again shortly".to_string())?;
        answer
            .await
            .map_err(|_| "the shard is stopping; try again shortly".to_string())?
    }

    /// Applies `action` of player `user` on shard `shard`; the answer once it is on disk. In a
    /// clustered world a shard run by another node is asked there.
    pub async fn act(
        &self,
        shard: u32,
        user: Uuid,
        action: Action,
    ) -> Result<serde_json::Value, RpcError> {
        if !self.limit.allow(user) {
            return Err(RpcError::new(
                RpcCode::ResourceExhausted,
                "Too many world actions: slow down.",
            ));
        }
        if shard as usize >= self.config.shards {
            return Err(RpcError::new(
                RpcCode::NotFound,
                format!("No shard {shard}: this world has {}.", self.config.shards),
            ));
        }
        match (self.inbox(shard as usize), &self.cluster) {
            (None, Some(cluster)) => cluster.act_remote(shard, user, action, &self.metrics).await,
            _ => self.act_here(shard, user, action).await,
        }
    }

    /// Applies `action` on shard `shard`, run by this node.
    ///
    /// An action that costs something is quoted by its shard first (which checks everything
    /// that would refuse it), paid through the economy's ledger, then applied; if the shard
    /// refuses it after all (the world changed in between) or cannot record it, what was paid
    /// is refunded (a keyed credit, written once whatever happens).
    async fn act_here(
        &self,
        shard: u32,
        user: Uuid,
        action: Action,
    ) -> Result<serde_json::Value, RpcError> {
        let inbox = self
            .inbox(shard as usize)
            .ok_or_else(|| runner::moving(shard))?;
        let reason = action.reason();
        let quote = ask(&inbox, |reply| Command::Quote {
            user,
            action: action.clone(),
            reply,
        })
        .await?;
        let key = format!("world:{shard}:action:{}", Uuid::new_v4().simple());
        if quote > 0 {
            let amount = i64::try_from(quote).unwrap_or(i64::MAX);
            let change = crate::economy::Change::new(user, reason)
                .spend(&self.currency, amount)
                .idempotency_key(&key);
            self.economy.apply(change).await?;
        }
        let result = ask(&inbox, |reply| Command::Act {
            user,
            action,
            paid: quote,
            reply,
        })
        .await;
        if result.is_err() && quote > 0 {
            self.payouts.pay(payouts::Credit {
                user,
                amount: i64::try_from(quote).unwrap_or(i64::MAX),
                key: format!("{key}:refund"),
                reason: "world_refund".into(),
                shard,
            });
        }
        result
    }

    /// Forgets the rate-limit state of players who have been quiet (housekeeping).
    pub fn prune_limits(&self) {
        self.limit.prune();
    }

    /// Ends `session_id`'s subscription, wherever it is.
    pub fn unsubscribe(&self, session_id: Uuid) {
        self.leave(session_id, None);
        if let Some(cluster) = &self.cluster {
            if let Some(shard) = cluster.unwatch(session_id) {
                if self.inbox(shard as usize).is_none() {
                    cluster.unsubscribe_remote(shard, session_id);
                }
            }
        }
    }

    /// Unsubscribes `session_id` from every shard run here but `except`.
    fn leave(&self, session_id: Uuid, except: Option<usize>) {
        for (i, running) in self.running.read().iter().enumerate() {
            if let (Some(running), false) = (running, Some(i) == except) {
                // A full inbox drops this; the shard also drops a subscriber whose socket
                // closed.
                let _ = running.inbox.try_send(Command::Unsubscribe { session_id });
            }
        }
    }

    /// Waits for every shard to write its last checkpoint and stop, once the shutdown token
    /// has fired. Blocking: call it from a blocking context. (In a clustered world,
    /// [`World::release`] then gives the leases up.)
    pub fn stop(&self) {
        let _stopping = self.stopping.lock();
        let running: Vec<Arc<Running>> = self.running.read().iter().flatten().cloned().collect();
        for shard in running {
            if let Some(thread) = shard.thread.lock().take() {
                let _ = thread.join();
            }
        }
    }

    /// A clustered world, once [`World::stop`] has written every shard's last checkpoint: gives
    /// their leases up, so that other nodes take them at once.
    pub async fn release(&self) {
        if let Some(cluster) = &self.cluster {
            cluster.release_all(&self.metrics).await;
        }
    }
}

/// Sends a shard the command `make` builds and waits for its answer.
async fn ask<T>(
    inbox: &mpsc::SyncSender<Command>,
    make: impl FnOnce(tokio::sync::oneshot::Sender<Result<T, RpcError>>) -> Command,
) -> Result<T, RpcError> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    inbox.try_send(make(reply)).map_err(|_| {
        RpcError::new(
            RpcCode::Unavailable,
            "The world is busy; try again shortly.",
        )
    })?;
    answer
        .await
        .map_err(|_| RpcError::new(RpcCode::Unavailable, "The world is shutting down."))?
}

impl SessionObserver for World {
    fn session_closed(&self, session: &Arc<Session>) {
        self.unsubscribe(session.session_id);
    }
}

impl crate::cluster::membership::MembershipObserver for World {
    fn node_joined(&self, node: &str) {
        if let Some(cluster) = &self.cluster {
            cluster.peers.lock().insert(node.to_string());
        }
    }

    fn node_left(&self, node: &str, _why: crate::cluster::membership::Departure) {
        if let Some(cluster) = &self.cluster {
            cluster.peers.lock().remove(node);
        }
        for running in self.running.read().iter().flatten() {
            let _ = running.inbox.try_send(Command::DropNode {
                node: node.to_string(),
            });
        }
    }
}
