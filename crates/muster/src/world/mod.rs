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
mod offline;
pub mod payouts;
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

use crate::base::config::WorldConfig;
use crate::functions::{RpcCode, RpcError};
use actions::Action;
use log::ActionLog;
use metrics::WorldMetrics;
use runner::{Aoi, ShardRun};

/// The running world.
pub struct World {
    threads: parking_lot::Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Each shard thread's inbox.
    inboxes: Vec<mpsc::SyncSender<Command>>,
    /// Where actions are paid for, in `currency`.
    economy: Arc<crate::economy::Economy>,
    currency: String,
    /// Credits owed (arrivals, refunds of actions paid for but not applied).
    payouts: Arc<payouts::Payouts>,
    /// Actions per player per second.
    limit: crate::base::ratelimit::KeyedLimit<Uuid>,
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
        let payouts = payouts::Payouts::start(
            economy.clone(),
            config.reward_currency.clone(),
            config.max_waiting_credits,
            metrics.clone(),
        );
        // Players' new routes are computed off the shard threads, behind a bounded queue.
        let routes = Arc::new(muster_world::routing::RouteQueue::start(
            ground.router.clone(),
            2,
            config.route_queue,
        ));
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut handles = Vec::new();
        let mut inboxes = Vec::new();
        for i in 0..config.shards {
            let Loaded {
                shard,
                restored,
                log,
                credits,
                ..
            } = load_or_seed(config, &ground, &dir, i)?;
            for credit in credits {
                payouts.pay(credit);
            }
            if restored {
                metrics.restored.inc();
            }
            for damage in log.damage() {
                let kind = if damage.tail { "torn_tail" } else { "middle" };
                metrics.log_damage.with_label_values(&[kind]).inc();
            }
            tracing::info!(
                shard = i,
                restored,
                towers = shard.towers.len(),
                creeps = shard.creeps.alive(),
                "world: shard ready"
            );
            metrics.count_actors(&shard);
            let (inbox, commands) = mpsc::sync_channel(INBOX);
            inboxes.push(inbox.clone());
            let run = ShardRun {
                aoi: Aoi {
                    every: ((config.rules.tick_hz / config.aoi_hz).round() as u64).max(1),
                    max_side: config.aoi_max_side_m,
                    margin: config.aoi_margin_m,
                    threads,
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
                config: config.clone(),
                dir: dir.clone(),
                broken: false,
                unlogged: Vec::new(),
                covered: None,
                tick_unix_ms: 0,
                shard,
                path: checkpoint_path(&dir, i),
                interval: Duration::from_secs(config.checkpoint_interval_s),
                metrics: metrics.clone(),
                shutdown: shutdown.clone(),
            };
            let thread = std::thread::Builder::new()
                .name(format!("world-shard-{i}"))
                .spawn(move || run.run())?;
            handles.push(thread);
        }
        metrics.shards.set(config.shards as i64);
        tracing::info!(
            shards = config.shards,
            ms = started.elapsed().as_millis() as u64,
            "world: started"
        );
        Ok(Some(Arc::new(World {
            threads: parking_lot::Mutex::new(handles),
            inboxes,
            economy,
            currency: config.reward_currency.clone(),
            payouts,
            limit: crate::base::ratelimit::KeyedLimit::new(
                config.actions_per_sec,
                config.action_burst,
            ),
        })))
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
        self.leave(session.session_id, Some(request.shard as usize));
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
    ///
    /// An action that costs something is quoted by its shard first (which checks everything
    /// that would refuse it), paid through the economy's ledger, then applied; if the shard
    /// refuses it after all (the world changed in between) or cannot record it, what was paid
    /// is refunded (a keyed credit, written once whatever happens).
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
        let inbox = self.inboxes.get(shard as usize).ok_or_else(|| {
            RpcError::new(
                RpcCode::NotFound,
                format!("No shard {shard}: this world has {}.", self.inboxes.len()),
            )
        })?;
        let reason = action.reason();
        let quote = ask(inbox, |reply| Command::Quote {
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
        let result = ask(inbox, |reply| Command::Act {
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
    }

    /// Unsubscribes `session_id` from every shard but `except`.
    fn leave(&self, session_id: Uuid, except: Option<usize>) {
        for (i, inbox) in self.inboxes.iter().enumerate() {
            if Some(i) != except {
                // A full inbox drops this; the shard also drops a subscriber whose socket
                // closed.
                let _ = inbox.try_send(Command::Unsubscribe { session_id });
            }
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
