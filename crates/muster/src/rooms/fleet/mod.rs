//! The studio's own game servers as rooms (docs/fleet.md): for each server kind of
//! `[fleet.servers.*]`, Muster starts processes, keeps a warm pool of ready ones, allocates one
//! to each room created with that kind's name, supervises them through the Agones SDK's REST
//! API (served by the edge, `crate::net::fleet_sdk`, through [`SdkServer`]) and stops them when
//! their room ends.
//!
//! - `process`: one process — started, its output kept, stopped;
//! - `ports`: the game ports of `fleet.port_range`;
//! - `reaper` and `exec`: no orphan processes, even after a kill -9 of Muster;
//! - [`agones`]: rooms past one machine, allocated from Agones fleets (`[fleet.agones.*]`).
//!
//! A room create takes a ready process from the pool (a warm allocation); else it starts one
//! (a cold start) and waits for its Ready; at `max` it waits in a bounded queue until a process
//! is free or `queue_timeout_ms` passes. A process that exits, misses its health deadline or
//! asks to shut down ends its room; the room's players, connected to it, see their connection
//! close, and the room's id answers "ended" with the reason for a while.

pub mod agones;
pub mod config;
pub(crate) mod exec;
pub(crate) mod ports;
pub(crate) mod process;
pub(crate) mod reaper;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use dashmap::DashMap;
use parking_lot::Mutex;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use self::agones::{Allocation, Allocator};
use self::ports::Ports;
use self::process::{Assignment, GameServer, Phase, Stop};
use self::reaper::Reaper;
use crate::matches::error::MatchError;
use crate::matches::id::MatchId;
use crate::matches::join_tokens::{JoinClaims, JoinTokens};
use crate::rooms::fleet::config::{FleetConfig, ServerConfig};

/// How long an ended room's id is remembered as ended (with its reason).
const ENDED_MEMORY: Duration = Duration::from_secs(600);

/// The processes of one server kind.
/// A create's place in a pool's queue of creates waiting for a server (`Pool::waiting` and the
/// `fleet_creates_queued` gauge); given back when dropped.
struct QueuePlace {
    waiting: Arc<std::sync::atomic::AtomicUsize>,
    gauge: prometheus::IntGauge,
    /// Creates that were waiting before this one.
    ahead: usize,
}

impl QueuePlace {
    fn take(pool: &Pool, gauge: prometheus::IntGauge) -> QueuePlace {
        let ahead = pool
            .waiting
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        gauge.inc();
        QueuePlace {
            waiting: pool.waiting.clone(),
            gauge,
            ahead,
        }
    }
}

impl Drop for QueuePlace {
    fn drop(&mut self) {
        self.waiting
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        self.gauge.dec();
    }
}

struct Pool {
    name: String,
    config: ServerConfig,
    /// Running processes (until they exit).
    servers: Mutex<Vec<Arc<GameServer>>>,
    /// Told when a process becomes ready or exits (room for another).
    changed: Notify,
    /// Room creates waiting for a process.
    waiting: Arc<std::sync::atomic::AtomicUsize>,
}

impl Pool {
    /// The ready, unallocated process that has waited longest, now allocated to `room`.
    fn take_ready(&self, room: &Assignment) -> Option<Arc<GameServer>> {
        let servers = self.servers.lock();
        servers
            .iter()
            .find(|s| {
                s.update(|state| {
                    let free = state.phase == Phase::Ready && state.room.is_none();
                    if free {
                        state.phase = Phase::Allocated;
                        state.room = Some(room.clone());
                        state.player_capacity = i64::from(room.capacity);
                    }
                    free
                })
            })
            .cloned()
    }

    /// (running, idle: started or ready and not allocated, starting: not ready yet).
    fn counts(&self) -> (usize, usize, usize) {
        let servers = self.servers.lock();
        let (mut idle, mut starting) = (0, 0);
        for server in servers.iter() {
            let state = server.state();
            if matches!(state.phase, Phase::Scheduled | Phase::Ready) && state.room.is_none() {
                idle += 1;
            }
            if state.phase == Phase::Scheduled {
                starting += 1;
            }
        }
        (servers.len(), idle, starting)
    }

    /// Whether one more process may start now: under `max`, and under `max_starting` at once
    /// (a burst that starts everything together starves every start of CPU).
    fn may_start(&self) -> bool {
        let (running, _, starting) = self.counts();
        running < self.config.max && starting < self.config.max_starting
    }

    /// No warm pool: each process is started for its room.
    fn cold_only(&self) -> bool {
        self.config.buffer == 0 && self.config.min == 0
    }
}

struct Metrics {
    processes: IntGaugeVec,
    allocations: IntCounterVec,
    allocation_seconds: HistogramVec,
    exits: IntCounterVec,
    /// Room creates waiting at `max` for a process, by server (the pool's `waiting`).
    queued: IntGaugeVec,
}

impl Metrics {
    fn register(registry: &Registry) -> Metrics {
        macro_rules! register {
            ($metric:expr) => {
                crate::base::metrics::register(registry, $metric)
            };
        }
        Metrics {
            processes: register!(IntGaugeVec::new(
                Opts::new("fleet_processes", "Game server processes running, by server and state."),
                &["server", "state"]
            )),
            allocations: register!(IntCounterVec::new(
                Opts::new(
                    "fleet_allocations_total",
                    "Rooms given a process: warm (from the pool), cold (started for it), queued (waited at max)."
                ),
                &["server", "how"]
            )),
            allocation_seconds: register!(HistogramVec::new(
                HistogramOpts::new(
                    "fleet_allocation_seconds",
                    "From a room create to its process, queueing and cold starts included."
                )
                .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
                &["server"]
            )),
            exits: register!(IntCounterVec::new(
                Opts::new("fleet_exits_total", "Game server processes that ended, by why."),
                &["server", "why"]
            )),
            queued: register!(IntGaugeVec::new(
                Opts::new(
                    "fleet_creates_queued",
                    "Room creates waiting for a free game server process (the fleet is at max)."
                ),
                &["server"]
            )),
        }
    }
}

/// The fleet: every server kind's pool, the rooms they serve.
/// What serves a game server's Agones SDK over HTTP (the edge: `crate::net::fleet_sdk`), given
/// once the server is built.
pub trait SdkServer: Send + Sync {
    /// Serves `server`'s SDK on `listener` until the game server exits.
    fn serve(&self, listener: tokio::net::TcpListener, server: Arc<GameServer>, fleet: Arc<Fleet>);
}

pub struct Fleet {
    /// What answers each game server's SDK (set once, before the first server starts).
    sdk: std::sync::OnceLock<Arc<dyn SdkServer>>,
    me: Weak<Fleet>,
    node: String,
    pools: HashMap<String, Pool>,
    ports: Ports,
    /// The executable whose `fleet-exec` starts each game server (`fleet.launcher`).
    launcher: std::path::PathBuf,
    reaper: Reaper,
    tokens: Arc<JoinTokens>,
    /// Rooms by uuid.
    rooms: DashMap<Uuid, Arc<GameServer>>,
    /// Ended rooms: uuid → (why, when).
    ended: DashMap<Uuid, (String, Instant)>,
    /// Agones kinds' allocators, by handler name.
    allocators: HashMap<String, (Allocator, Duration)>,
    /// Rooms allocated from Agones: uuid → (kind, room, where, remembered until).
    allocated: DashMap<Uuid, (String, Assignment, Allocation, Instant)>,
    metrics: Metrics,
    shutdown: CancellationToken,
}

/// A room of the fleet, as the rooms API shows it.
pub struct FleetRoom {
    pub room: Assignment,
    pub handler: String,
    pub players: usize,
    /// Where players connect: the allocated address (Agones); `None`: this machine.
    pub host: Option<String>,
    pub port: u16,
    /// The process serving it, for a room of the local fleet.
    pub server: Option<Arc<GameServer>>,
}

impl FleetRoom {
    fn of_process(server: Arc<GameServer>, room: Assignment) -> FleetRoom {
        FleetRoom {
            handler: server.handler.clone(),
            players: server.state().players.len(),
            host: None,
            port: server.port,
            room,
            server: Some(server),
        }
    }

    fn of_allocation(handler: &str, room: &Assignment, allocation: &Allocation) -> FleetRoom {
        FleetRoom {
            room: room.clone(),
            handler: handler.to_string(),
            players: 0,
            host: Some(allocation.address.clone()),
            port: allocation.port,
            server: None,
        }
    }
}

impl Fleet {
    /// Gives the fleet what answers its game servers' SDK (once).
    pub fn serve_sdk_with(&self, sdk: Arc<dyn SdkServer>) {
        let _ = self.sdk.set(sdk);
    }

    /// The fleet of `config` (`None` when it names no server). Checks every command can be
    /// run, and kills what a previous run of Muster left (`data_dir/fleet-processes`).
    pub fn new(
        config: &FleetConfig,
        node: &str,
        data_dir: &Path,
        tokens: Arc<JoinTokens>,
        registry: &Registry,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Option<Arc<Fleet>>> {
        if config.servers.is_empty() && config.agones.is_empty() {
            return Ok(None);
        }
        let mut allocators = HashMap::new();
        for (name, agones) in &config.agones {
            let ttl = Duration::from_secs(agones.room_ttl_s);
            allocators.insert(name.clone(), (Allocator::new(name, agones)?, ttl));
        }
        let (first, last) = config.ports().map_err(anyhow::Error::msg)?;
        for (name, server) in &config.servers {
            if let Err(why) = runnable(&server.command, &server.working_dir) {
                anyhow::bail!("fleet.servers.{name}.command: {why}");
            }
        }
        let launcher = if config.launcher.is_empty() {
            std::env::current_exe()?
        } else {
            if let Err(why) = runnable(&config.launcher, "") {
                anyhow::bail!("fleet.launcher: {why}");
            }
            config.launcher.clone().into()
        };
        std::fs::create_dir_all(data_dir)?;
        let (reaper, reaped) = Reaper::open(&data_dir.join("fleet-processes"));
        if reaped > 0 {
            tracing::warn!(
                reaped,
                "fleet: killed game servers a previous run of Muster left"
            );
        }
        let pools = config
            .servers
            .iter()
            .map(|(name, server)| {
                (
                    name.clone(),
                    Pool {
                        name: name.clone(),
                        config: server.clone(),
                        servers: Mutex::new(Vec::new()),
                        changed: Notify::new(),
                        waiting: Default::default(),
                    },
                )
            })
            .collect();
        Ok(Some(Arc::new_cyclic(|me| Fleet {
            sdk: std::sync::OnceLock::new(),
            me: me.clone(),
            node: node.to_string(),
            pools,
            ports: Ports::new(first, last),
            launcher,
            reaper,
            tokens,
            rooms: DashMap::new(),
            ended: DashMap::new(),
            allocators,
            allocated: DashMap::new(),
            metrics: Metrics::register(registry),
            shutdown,
        })))
    }

    /// Fills every warm pool, and stops every process when the server shuts down.
    pub fn start(self: &Arc<Self>) {
        for name in self.pools.keys() {
            self.refill(name);
        }
        let fleet = self.clone();
        tokio::spawn(async move {
            fleet.shutdown.cancelled().await;
            for pool in fleet.pools.values() {
                for server in pool.servers.lock().iter() {
                    server.stop(Stop::Stopped, "Muster is shutting down");
                }
            }
        });
    }

    /// Whether rooms of `handler` are game server processes.
    pub fn serves(&self, handler: &str) -> bool {
        self.pools.contains_key(handler) || self.allocators.contains_key(handler)
    }

    /// A process for a new room of `handler`; waits for one (at most the queue timeout) when
    /// the fleet is at its maximum.
    pub async fn create_room(
        &self,
        handler: &str,
        capacity: u32,
        owner: Option<Uuid>,
        params: HashMap<String, String>,
    ) -> Result<FleetRoom, MatchError> {
        let id = MatchId::new_authoritative(&self.node);
        let room = Assignment {
            room_id: id.display(&self.node),
            capacity,
            owner,
            params,
            created_at_ms: crate::base::clock::now_ms(),
        };
        if let Some((allocator, ttl)) = self.allocators.get(handler) {
            let began = Instant::now();
            let allocation = allocator
                .allocate(&room.room_id, capacity, &room.params)
                .await?;
            self.metrics
                .allocations
                .with_label_values(&[handler, "agones"])
                .inc();
            self.metrics
                .allocation_seconds
                .with_label_values(&[handler])
                .observe(began.elapsed().as_secs_f64());
            let fleet_room = FleetRoom::of_allocation(handler, &room, &allocation);
            let until = Instant::now() + *ttl;
            self.allocated
                .insert(id.uuid, (handler.to_string(), room, allocation, until));
            return Ok(fleet_room);
        }
        let pool = self
            .pools
            .get(handler)
            .ok_or_else(|| MatchError::BadInput(format!("No game server called '{handler}'.")))?;
        let began = Instant::now();
        let deadline = began + Duration::from_millis(pool.config.queue_timeout_ms);
        // A place in the queue, once taken: given back however the create ends (a server
        // found, the wait timed out, or a spawn failing with `?`).
        let mut queued: Option<QueuePlace> = None;
        let mut started_one = false;
        let server = loop {
            let changed = pool.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !pool.cold_only() {
                if let Some(server) = pool.take_ready(&room) {
                    let how = match (queued.is_some(), started_one) {
                        (true, _) => "queued",
                        (false, true) => "cold",
                        (false, false) => "warm",
                    };
                    self.allocated(pool, how, began);
                    break server;
                }
            }
            if pool.may_start() {
                if pool.cold_only() {
                    let server = self.spawn(pool, Some(room.clone()))?;
                    self.until_ready(&server, &pool.config).await?;
                    let how = if queued.is_some() { "queued" } else { "cold" };
                    self.allocated(pool, how, began);
                    break server;
                }
                self.spawn(pool, None)?;
                started_one = true;
            } else if queued.is_none() && pool.counts().0 >= pool.config.max {
                let place =
                    QueuePlace::take(pool, self.metrics.queued.with_label_values(&[&pool.name]));
                if place.ahead >= pool.config.max_queue {
                    return Err(MatchError::Rejected(format!(
                        "All {} '{}' game servers are busy and {} creates are waiting; try later.",
                        pool.config.max, pool.name, pool.config.max_queue
                    )));
                }
                queued = Some(place);
            }
            let timed_out = tokio::select! {
                () = &mut changed => false,
                () = tokio::time::sleep_until(deadline) => true,
            };
            if timed_out {
                return Err(MatchError::Rejected(format!(
                    "No '{}' game server was free within {} ms; try again.",
                    pool.name, pool.config.queue_timeout_ms
                )));
            }
        };
        drop(queued);
        self.rooms.insert(id.uuid, server.clone());
        self.refill_soon(handler);
        self.count_phases(pool);
        Ok(FleetRoom::of_process(server, room))
    }

    fn allocated(&self, pool: &Pool, how: &str, began: Instant) {
        self.metrics
            .allocations
            .with_label_values(&[&pool.name, how])
            .inc();
        self.metrics
            .allocation_seconds
            .with_label_values(&[&pool.name])
            .observe(began.elapsed().as_secs_f64());
    }

    /// Waits until `server` is ready (it is stopped, and this fails, past the ready timeout).
    async fn until_ready(
        &self,
        server: &GameServer,
        config: &ServerConfig,
    ) -> Result<(), MatchError> {
        let mut changes = server.watch();
        let limit = Duration::from_millis(config.ready_timeout_ms);
        let waited = tokio::time::timeout(limit, async {
            loop {
                match server.phase() {
                    Phase::Ready | Phase::Allocated => return true,
                    Phase::Scheduled | Phase::Reserved => {}
                    _ => return false,
                }
                tokio::select! {
                    changed = changes.changed() => if changed.is_err() { return false },
                    () = server.exited.cancelled() => return false,
                }
            }
        })
        .await;
        if waited == Ok(true) {
            server.update(|s| s.phase = Phase::Allocated);
            Ok(())
        } else {
            Err(MatchError::Rejected(format!(
                "The game server did not become ready within {} ms.",
                config.ready_timeout_ms
            )))
        }
    }

    /// Starts a process of `pool` (for `room` when given) and everything that watches it.
    fn spawn(&self, pool: &Pool, room: Option<Assignment>) -> Result<Arc<GameServer>, MatchError> {
        let port = self.ports.take().ok_or_else(|| {
            MatchError::Rejected(format!(
                "No free port left in fleet.port_range ({} in use); try later.",
                self.ports.in_use()
            ))
        })?;
        let sdk = std::net::TcpListener::bind(("127.0.0.1", 0)).and_then(|listener| {
            listener.set_nonblocking(true)?;
            let port = listener.local_addr()?.port();
            Ok((tokio::net::TcpListener::from_std(listener)?, port))
        });
        let (listener, sdk_port) = match sdk {
            Ok(bound) => bound,
            Err(error) => {
                self.ports.give_back(port);
                return Err(MatchError::Rejected(format!(
                    "Cannot open the game server's SDK port: {error}"
                )));
            }
        };
        let (server, child) = match GameServer::start(
            &self.launcher,
            &pool.name,
            &pool.config,
            port,
            sdk_port,
            room,
        ) {
            Ok(started) => started,
            Err(error) => {
                self.ports.give_back(port);
                tracing::warn!(server = pool.name, %error, "fleet: cannot start a game server");
                return Err(MatchError::Rejected(format!(
                    "Cannot start a '{}' game server: {error}",
                    pool.name
                )));
            }
        };
        self.reaper.started(server.pid);
        pool.servers.lock().push(server.clone());
        let Some(fleet) = self.me.upgrade() else {
            return Ok(server);
        };
        match self.sdk.get() {
            Some(sdk) => sdk.serve(listener, server.clone(), fleet.clone()),
            None => tracing::warn!(
                server = pool.name,
                "fleet: no SDK server to answer the game server"
            ),
        }
        tokio::spawn(
            fleet
                .clone()
                .supervise(pool.name.clone(), server.clone(), child),
        );
        tokio::spawn(watchdog(server.clone(), pool.config.clone()));
        self.count_phases(pool);
        Ok(server)
    }

    /// Waits for the process to exit, then ends its room and frees its port.
    async fn supervise(
        self: Arc<Self>,
        pool_name: String,
        server: Arc<GameServer>,
        mut child: tokio::process::Child,
    ) {
        let status = child.wait().await;
        server.exited.cancel();
        self.reaper.ended(server.pid);
        self.ports.give_back(server.port);
        let Some(pool) = self.pools.get(&pool_name) else {
            return;
        };
        pool.servers.lock().retain(|s| s.id != server.id);
        let exit = match &status {
            Ok(status) => status.to_string(),
            Err(error) => format!("unknown ({error})"),
        };
        let stopped = server.ending.lock().clone();
        let (why, label) = match stopped {
            Some((kind, why)) => (why, kind.label()),
            None => (format!("the game server exited ({exit})"), "exited"),
        };
        if label == "exited" && !status.as_ref().is_ok_and(|s| s.success()) {
            let output = server.output();
            // The last 1,000 characters.
            let from = output.char_indices().rev().nth(999).map_or(0, |(i, _)| i);
            let tail = &output[from..];
            tracing::warn!(server = pool_name, pid = server.pid, %exit, output = %tail, "fleet: a game server exited");
        }
        self.metrics
            .exits
            .with_label_values(&[&pool_name, label])
            .inc();
        if let Some(room) = server.state().room {
            if let Ok((id, _)) = MatchId::parse_any(&room.room_id) {
                self.rooms.remove(&id.uuid);
                self.ended.insert(id.uuid, (why, Instant::now()));
            }
        }
        self.ended.retain(|_, (_, at)| at.elapsed() < ENDED_MEMORY);
        pool.changed.notify_waiters();
        self.count_phases(pool);
        if !self.shutdown.is_cancelled() {
            self.refill(&pool_name);
        }
    }

    /// [`Fleet::refill`] off the caller's path (a room create answers first).
    fn refill_soon(&self, handler: &str) {
        let Some(fleet) = self.me.upgrade() else {
            return;
        };
        let handler = handler.to_string();
        tokio::spawn(async move { fleet.refill(&handler) });
    }

    /// Starts processes until the pool has its warm buffer and its minimum (within `max`).
    pub fn refill(&self, handler: &str) {
        let Some(pool) = self.pools.get(handler) else {
            return;
        };
        let (running, idle, starting) = pool.counts();
        let config = &pool.config;
        let wanted = config
            .buffer
            .saturating_sub(idle)
            .max(config.min.saturating_sub(running))
            .min(config.max.saturating_sub(running))
            .min(config.max_starting.saturating_sub(starting));
        for _ in 0..wanted {
            if let Err(error) = self.spawn(pool, None) {
                tracing::warn!(server = pool.name, %error, "fleet: cannot fill the warm pool");
                break;
            }
        }
        self.count_phases(pool);
    }

    /// An allocated process called Ready again (Agones' reuse of a GameServer): its room is
    /// over, and it is back in the warm pool.
    pub fn room_released(&self, server: &GameServer, room: &Assignment) {
        if let Ok((id, _)) = MatchId::parse_any(&room.room_id) {
            self.rooms.remove(&id.uuid);
            self.ended.insert(
                id.uuid,
                (
                    "the game server made itself ready for another room".into(),
                    Instant::now(),
                ),
            );
        }
        self.server_ready(server);
    }

    /// A process called Ready (or became ready again): a waiting create may take it, and the
    /// pool may start another.
    pub fn server_ready(&self, server: &GameServer) {
        if let Some(pool) = self.pools.get(&server.handler) {
            pool.changed.notify_waiters();
            self.count_phases(pool);
        }
        self.refill_soon(&server.handler);
    }

    fn count_phases(&self, pool: &Pool) {
        let mut counts: HashMap<&'static str, i64> = HashMap::new();
        for server in pool.servers.lock().iter() {
            *counts.entry(server.phase().name()).or_default() += 1;
        }
        for phase in [
            Phase::Scheduled,
            Phase::Ready,
            Phase::Reserved,
            Phase::Allocated,
            Phase::Unhealthy,
            Phase::Shutdown,
        ] {
            self.metrics
                .processes
                .with_label_values(&[&pool.name, phase.name()])
                .set(counts.get(phase.name()).copied().unwrap_or(0));
        }
    }

    /// The room `id` if a process serves it; "ended" (with why) for a while after it ended.
    pub fn room(&self, id: &str) -> Result<Option<FleetRoom>, MatchError> {
        let Ok((match_id, _)) = MatchId::parse_any(id) else {
            return Ok(None);
        };
        if let Some(server) = self.rooms.get(&match_id.uuid) {
            let server = server.clone();
            let Some(room) = server.state().room else {
                return Ok(None);
            };
            return Ok(Some(FleetRoom::of_process(server, room)));
        }
        let expired = match self.allocated.get(&match_id.uuid) {
            Some(entry) => {
                let (handler, room, allocation, until) = entry.value();
                if Instant::now() < *until {
                    return Ok(Some(FleetRoom::of_allocation(handler, room, allocation)));
                }
                true
            }
            None => false,
        };
        if expired {
            self.allocated.remove(&match_id.uuid);
            self.ended.insert(
                match_id.uuid,
                (
                    "allocated from Agones, remembered for room_ttl_s".into(),
                    Instant::now(),
                ),
            );
        }
        match self.ended.get(&match_id.uuid) {
            Some(ended) => Err(MatchError::Ended(format!("Room ended: {}.", ended.0))),
            None => Ok(None),
        }
    }

    /// Every room a process serves (up to `limit`), optionally of one server kind.
    pub fn rooms(&self, handler: Option<&str>, limit: usize) -> Vec<FleetRoom> {
        let now = Instant::now();
        let processes = self
            .rooms
            .iter()
            .filter(|r| handler.is_none_or(|h| r.value().handler == h))
            .filter_map(|r| {
                let server = r.value().clone();
                server
                    .state()
                    .room
                    .map(|room| FleetRoom::of_process(server, room))
            });
        let allocated = self.allocated.iter().filter_map(|entry| {
            let (kind, room, allocation, until) = entry.value();
            (handler.is_none_or(|h| kind == h) && now < *until)
                .then(|| FleetRoom::of_allocation(kind, room, allocation))
        });
        processes.chain(allocated).take(limit).collect()
    }

    /// A player's ticket for `server`'s room, used up: who the player is.
    pub fn redeem_ticket(&self, server: &GameServer, ticket: &str) -> Result<JoinClaims, String> {
        let claims = self.tokens.verify(ticket).map_err(|e| e.to_string())?;
        let room = server
            .state()
            .room
            .ok_or("This game server has no room yet.")?;
        let (id, _) = MatchId::parse_any(&room.room_id).map_err(|e| e.to_string())?;
        if claims.mid != id.uuid {
            return Err("The ticket is for another room.".into());
        }
        self.tokens.consume(&claims).map_err(|e| e.to_string())?;
        Ok(claims)
    }
}

/// Stops a process that does not call Ready in time, and one that misses its health deadline.
async fn watchdog(server: Arc<GameServer>, config: ServerConfig) {
    let ready_by = Instant::now() + Duration::from_millis(config.ready_timeout_ms);
    let health = Duration::from_millis(config.health_timeout_ms);
    let every = Duration::from_millis((config.health_timeout_ms / 4).clamp(50, 1000));
    loop {
        tokio::select! {
            () = server.exited.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let state = server.state();
        match state.phase {
            Phase::Scheduled if Instant::now() >= ready_by => {
                server.stop(
                    Stop::NotReady,
                    &format!(
                        "the game server did not call Ready within {} ms",
                        config.ready_timeout_ms
                    ),
                );
                return;
            }
            Phase::Ready | Phase::Reserved | Phase::Allocated
                if !health.is_zero() && state.last_health.elapsed() > health =>
            {
                server.update(|s| s.phase = Phase::Unhealthy);
                server.stop(
                    Stop::Unhealthy,
                    &format!(
                        "the game server sent no health ping for {} ms",
                        config.health_timeout_ms
                    ),
                );
                return;
            }
            Phase::Unhealthy | Phase::Shutdown => return,
            _ => {}
        }
    }
}

/// Whether `command` names an executable file (a path, or a name found in `PATH`).
fn runnable(command: &str, working_dir: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    let executable = |path: &Path| {
        std::fs::metadata(path)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if command.contains('/') {
        let path = if Path::new(command).is_absolute() || working_dir.is_empty() {
            Path::new(command).to_path_buf()
        } else {
            Path::new(working_dir).join(command)
        };
        return if executable(&path) {
            Ok(())
        } else {
            Err(format!("{command:?} is not an executable file"))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| executable(&dir.join(command))) {
        Ok(())
    } else {
        Err(format!("{command:?} was not found in PATH"))
    }
}
