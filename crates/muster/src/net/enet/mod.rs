//! The ENet transport: reliable UDP for matches and rooms, spoken by Godot's `ENetConnection`,
//! ENet-CSharp and anything linking libenet 1.3.
//!
//! A client connects (ENet's handshake; up to two channels), then sends `match_join { token }`
//! as its first packet, with a room ticket or a matchmaker token (single use, as on TCP): ENet's
//! connect data is a 32-bit number, too small for a ticket. After the join every ENet packet is
//! one protobuf realtime envelope, in both directions, as on the TCP transport. The server sends
//! `match_data` whose `reliable` is false on channel 1 (unreliable, sequenced: a late state is
//! dropped for the newer one), everything else on channel 0 (reliable, ordered); a client may
//! send on either.
//!
//! How it runs: one loop per core (`enet.loops`), each a task owning one UDP socket on the
//! shared port (`SO_REUSEPORT`: the kernel sends each client address to one socket) and its
//! ENet hosts (its share of `enet.max_peers` over hosts of `enet.peers_per_host`; ENet's peer
//! ids are 12 bits, so at most 4,095 per host); a turn services and flushes only the hosts that
//! got datagrams or have something to send, since each service and flush visits every peer of
//! its host. Each turn it reads waiting datagrams in batches (`recvmmsg`), routes each to the
//! host that holds its sender's address after checking it ([`wire`]: malformed, spoofed, over
//! its peer's budget, connect floods — dropped and counted), lets the hosts process them, hands
//! envelopes to the sessions' tasks, sends what every woken outbox holds, and writes all the
//! hosts' datagrams in batches (`sendmmsg`). A session's task (its [`peer`]) joins the match
//! and dispatches its envelopes in order, like a TCP connection's.
//!
//! Before a handshake completes nothing larger than the request is sent: ENet answers a
//! 52-byte CONNECT with a 48-byte VERIFY_CONNECT (resent on ENet's timer until the peer times
//! out), and connection attempts are held to `enet.connects_per_sec` in all and
//! `limits.connect_per_ip_per_sec` per address before ENet sees them.

pub mod batch;
pub mod peer;
pub mod wire;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use muster_proto::realtime::delivery::{delivery, Delivery};
use muster_proto::realtime::{self, error_code, match_join, Envelope, Message};
use parking_lot::Mutex;
use rusty_enet::{consts, Event, EventNoRef, Host, HostSettings, Packet, PeerID};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use self::batch::{BatchSocket, Datagrams};
use self::peer::{Command, PeerEntry, PeerKey, Phase};
use super::connection::{self, Ending, Transport};
use crate::config::EnetConfig;
use crate::net::state::AppState;
use crate::session::codec::Frame;
use crate::session::outbox::{Consumer, Outbox};
use crate::session::Format;

/// Envelopes waiting for a session's task; a peer that gets further ahead is disconnected.
const INBOUND_QUEUE: usize = 1024;
/// Receive batches read in one turn before the hosts process them (bounds a turn's latency).
const BATCHES_PER_TURN: usize = 16;
/// How long a send waits for a full socket buffer to drain before dropping the rest.
const SEND_PATIENCE: Duration = Duration::from_millis(5);
/// How long an address with no peer (a connect that never completed) keeps its host.
const ROUTE_LINGER: Duration = Duration::from_secs(30);
/// How long shutdown waits for peers to take their disconnect.
const SHUTDOWN_LINGER: Duration = Duration::from_millis(300);
/// The channels a peer may open: 0 reliable, 1 unreliable.
const CHANNELS: usize = 2;

/// Binds the transport's sockets on `config.listen`: one per loop (`enet.loops`), all on one
/// port. With more than one, each has `SO_REUSEPORT`, and the kernel hashes every client address
/// to one of them, so a peer's datagrams always reach the loop that holds it.
pub fn bind(config: &EnetConfig) -> std::io::Result<Vec<UdpSocket>> {
    let mut address: SocketAddr = config
        .listen
        .parse()
        .map_err(|_| std::io::Error::other("not an IP:port address"))?;
    let loops = config.loop_count();
    let mut sockets = Vec::with_capacity(loops);
    for _ in 0..loops {
        let socket = bind_one(address, loops > 1)?;
        // Port 0 asks for any: the others share the first one's.
        address = socket.local_addr()?;
        sockets.push(socket);
    }
    Ok(sockets)
}

fn bind_one(address: SocketAddr, shared: bool) -> std::io::Result<UdpSocket> {
    use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, SockaddrStorage};
    use std::os::fd::AsRawFd as _;
    let family = match address {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = socket::socket(
        family,
        SockType::Datagram,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    if shared {
        socket::setsockopt(&fd, sockopt::ReusePort, &true)?;
    }
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(address))?;
    UdpSocket::from_std(std::net::UdpSocket::from(fd))
}

/// Serves the ENet transport on `sockets` (from [`bind`]), one loop each, until the server
/// shuts down.
pub async fn serve(sockets: Vec<UdpSocket>, state: AppState) {
    let config = state.services.config.enet.per_loop();
    let loops: Vec<_> = sockets
        .into_iter()
        .filter_map(
            |socket| match Node::new(socket, config.clone(), state.clone()) {
                Ok(node) => Some(tokio::spawn(node.run())),
                Err(error) => {
                    tracing::error!(%error, "cannot start the ENet transport");
                    None
                }
            },
        )
        .collect();
    for running in loops {
        let _ = running.await;
    }
}

/// One ENet host and the peers it holds.
struct Shard {
    host: Host<Datagrams>,
    /// By ENet peer id.
    peers: Vec<Option<PeerEntry>>,
    /// Addresses routed here (connected or connecting).
    load: usize,
    /// Given datagrams or packets to send since its last flush: only such hosts (and all of
    /// them when ENet's timers are due) are serviced and flushed, because each service and each
    /// flush visits every peer of the host.
    active: bool,
}

impl Shard {
    /// The `index`-th host of the node: `enet.peers_per_host` peers, fewer for the last one
    /// when `enet.max_peers` is not a multiple.
    fn new(config: &EnetConfig, max_message: usize, index: usize) -> anyhow::Result<Shard> {
        let peer_limit = config
            .max_peers
            .saturating_sub(index * config.peers_per_host)
            .min(config.peers_per_host);
        let mut host = Host::new(
            Datagrams::default(),
            HostSettings {
                peer_limit,
                channel_limit: CHANNELS,
                incoming_bandwidth_limit: NonZeroU32::new(config.incoming_bandwidth_bytes_per_sec)
                    .map(NonZeroU32::get),
                outgoing_bandwidth_limit: NonZeroU32::new(config.outgoing_bandwidth_bytes_per_sec)
                    .map(NonZeroU32::get),
                ..Default::default()
            },
        )
        .map_err(|error| anyhow::anyhow!("ENet host: {error:?}"))?;
        // Reassembly is bounded: a packet a little over the message limit is still read (and
        // refused with an error); anything larger is dropped by ENet.
        host.set_maximum_packet_size(max_message * 2)
            .map_err(|error| anyhow::anyhow!("ENet packet size: {error:?}"))?;
        host.set_maximum_waiting_data(max_message * INBOUND_QUEUE)
            .map_err(|error| anyhow::anyhow!("ENet waiting data: {error:?}"))?;
        Ok(Shard {
            host,
            peers: (0..peer_limit).map(|_| None).collect(),
            load: 0,
            active: false,
        })
    }
}

/// The host a new address goes to: the least loaded, or a new one while every host has an
/// address and `enet.max_peers` allows more.
fn host_for_new_address(shards: &mut Vec<Shard>, config: &EnetConfig, max_message: usize) -> usize {
    let (least, load) = shards
        .iter()
        .enumerate()
        .map(|(index, shard)| (index, shard.load))
        .min_by_key(|&(_, load)| load)
        .unwrap_or((0, 0));
    if (load == 0 && !shards.is_empty()) || shards.len() >= config.hosts() {
        return least;
    }
    match Shard::new(config, max_message, shards.len()) {
        Ok(shard) => {
            shards.push(shard);
            shards.len() - 1
        }
        Err(error) => {
            tracing::warn!(%error, "cannot make another ENet host");
            least
        }
    }
}

/// Which host an address's peers live on (every peer of one address lives on one host, so a
/// datagram's peer id is enough to find its peer).
struct Route {
    host: usize,
    peers: usize,
    since: Instant,
}

/// The sessions whose outboxes have something to send, and the loop's wake-up.
#[derive(Default)]
struct Wakes {
    dirty: Mutex<Vec<PeerKey>>,
    notify: Notify,
}

impl Wakes {
    fn wake(&self, key: PeerKey) {
        let mut dirty = self.dirty.lock();
        let first = dirty.is_empty();
        dirty.push(key);
        drop(dirty);
        if first {
            self.notify.notify_one();
        }
    }
}

/// A session's outbox, as the loop takes it: a push that finds it empty puts the peer on the
/// loop's list of outboxes to drain.
struct PeerWake {
    wakes: Arc<Wakes>,
    key: PeerKey,
    /// Woken when the loop drains the outbox: the peer's task waits on it for room.
    drained: tokio::sync::Notify,
}

impl Consumer for PeerWake {
    fn wake(&self) -> bool {
        self.wakes.wake(self.key);
        true
    }

    fn drained(&self) -> Option<&tokio::sync::Notify> {
        Some(&self.drained)
    }
}

struct Node {
    io: BatchSocket,
    shards: Vec<Shard>,
    routes: HashMap<SocketAddr, Route>,
    wakes: Arc<Wakes>,
    /// Swapped with the dirty list each turn, so neither allocates.
    draining: Vec<PeerKey>,
    commands: mpsc::UnboundedReceiver<Command>,
    command_sender: mpsc::UnboundedSender<Command>,
    pending: Vec<Command>,
    connects: DefaultDirectRateLimiter,
    awaiting_join: VecDeque<(Instant, PeerKey)>,
    generation: u32,
    config: EnetConfig,
    state: AppState,
}

impl Node {
    /// A loop on `socket`, with its share of the node's settings (`config`).
    fn new(socket: UdpSocket, config: EnetConfig, state: AppState) -> anyhow::Result<Node> {
        // The hosts are made as addresses arrive, so an idle node holds no ENet peers; one is
        // made here to check the settings at start.
        let first = Shard::new(
            &config,
            state.services.config.socket.max_message_size_bytes,
            0,
        )?;
        let (command_sender, commands) = mpsc::unbounded_channel();
        let connects_per_sec = NonZeroU32::new(config.connects_per_sec).unwrap_or(NonZeroU32::MIN);
        Ok(Node {
            io: BatchSocket::new(socket, config.batch_size, config.socket_buffer_bytes),
            shards: vec![first],
            routes: HashMap::new(),
            wakes: Arc::default(),
            draining: Vec::new(),
            commands,
            command_sender,
            pending: Vec::new(),
            connects: RateLimiter::direct(Quota::per_second(connects_per_sec)),
            awaiting_join: VecDeque::new(),
            generation: 0,
            config,
            state,
        })
    }

    async fn run(mut self) {
        if let Ok(address) = self.io.local_addr() {
            tracing::debug!(%address, hosts = self.shards.len(), "ENet transport running");
        }
        let interval = Duration::from_millis(self.config.service_interval_ms);
        let gap = Duration::from_millis(self.config.turn_interval_ms);
        let mut next_timer = Instant::now() + interval;
        let mut next_sweep = Instant::now() + Duration::from_secs(1);
        let mut last_turn = Instant::now();
        let wakes = self.wakes.clone();
        loop {
            tokio::select! {
                biased;
                () = self.state.shutdown.cancelled() => break,
                readable = self.io.readable() => {
                    if let Err(error) = readable {
                        tracing::error!(%error, "ENet socket failed; the transport stops");
                        break;
                    }
                }
                () = wakes.notify.notified() => {}
                Some(command) = self.commands.recv() => self.pending.push(command),
                () = tokio::time::sleep_until(next_timer) => {}
            }
            // With `enet.turn_interval_ms`, turns are at least that far apart: what arrives and
            // what the matches send meanwhile shares one pass over the peers.
            if last_turn + gap > Instant::now() {
                tokio::time::sleep_until(last_turn + gap).await;
            }
            last_turn = Instant::now();
            let timers_due = last_turn >= next_timer;
            if timers_due {
                for shard in &mut self.shards {
                    shard.active = true;
                }
            }
            self.turn().await;
            let now = Instant::now();
            if timers_due {
                next_timer = now + interval;
            }
            if now >= next_sweep {
                next_sweep = now + Duration::from_secs(1);
                self.sweep_routes(now);
            }
        }
        self.shut_down().await;
    }

    /// Everything one wake-up does: read, process, answer, write.
    async fn turn(&mut self) {
        self.receive();
        self.service();
        while let Ok(command) = self.commands.try_recv() {
            self.pending.push(command);
        }
        // Outboxes before commands: a session that queued an error and then asked to be closed
        // gets its error sent first.
        self.drain_outboxes();
        for command in std::mem::take(&mut self.pending) {
            match command {
                Command::Close { key, ending } => self.close(key, ending),
            }
        }
        self.expire_handshakes();
        self.flush().await;
    }

    fn receive(&mut self) {
        let metrics = self.state.services.metrics.clone();
        for _ in 0..BATCHES_PER_TURN {
            let (received, called) = match self.io.receive() {
                Ok(received) => received,
                Err(error) => {
                    tracing::debug!(%error, "recvmmsg failed");
                    break;
                }
            };
            if called {
                metrics.enet_syscalls.with_label_values(&["recvmmsg"]).inc();
            }
            if received.is_empty() {
                break;
            }
            metrics
                .enet_datagrams
                .with_label_values(&["in"])
                .inc_by(received.len() as u64);
            let full = received.len() == self.config.batch_size;
            for datagram in &received {
                let verdict = if datagram.truncated {
                    Err("truncated")
                } else {
                    self.route(*datagram)
                };
                if let Err(reason) = verdict {
                    metrics.enet_dropped.with_label_values(&[reason]).inc();
                }
            }
            if !full {
                break;
            }
        }
    }

    /// Hands one received datagram to its host, or says why it was dropped.
    fn route(&mut self, datagram: batch::Received) -> Result<(), &'static str> {
        let (from, len) = (datagram.from, datagram.len);
        let bytes = self.io.bytes(&datagram);
        let host = match wire::classify(bytes) {
            wire::Kind::Malformed => return Err("malformed"),
            wire::Kind::Connect => {
                // Every attempt counts, retransmissions included: an ENet client resends its
                // CONNECT only on a timeout, a flood resends it as fast as it can.
                if self.connects.check().is_err()
                    || connection::allow_connect(&self.state, from.ip()).is_err()
                {
                    return Err("connect_rate");
                }
                match self.routes.get(&from) {
                    Some(route) => route.host,
                    None => {
                        let max_message = self.state.services.config.socket.max_message_size_bytes;
                        let host =
                            host_for_new_address(&mut self.shards, &self.config, max_message);
                        self.shards[host].load += 1;
                        self.routes.insert(
                            from,
                            Route {
                                host,
                                peers: 0,
                                since: Instant::now(),
                            },
                        );
                        host
                    }
                }
            }
            wire::Kind::Peer(peer) => {
                let route = self.routes.get(&from).ok_or("unknown_peer")?;
                let host = route.host;
                let shard = &self.shards[host];
                let mut oversized = None;
                if let Some(Some(entry)) = shard.peers.get(usize::from(peer)) {
                    if entry.address != from {
                        return Err("spoofed");
                    }
                    if !entry.within_budget(len) {
                        return Err("peer_rate");
                    }
                    // Up to twice the message limit ENet reassembles, and the packet is
                    // refused whole with an error (`received`); past that ENet would drop it.
                    let max_packet = 2 * self.state.services.config.socket.max_message_size_bytes;
                    let announced = wire::announced_packet_size(bytes) as usize;
                    if announced > max_packet {
                        oversized = Some((entry.key, announced));
                    }
                }
                if let Some((key, announced)) = oversized {
                    // ENet would drop the fragments unacknowledged and stall the channel:
                    // answer now, and end the peer (its reliable channel cannot recover).
                    self.refuse_oversized(host, PeerID(usize::from(peer)), key, announced);
                    return Err("oversized");
                }
                host
            }
        };
        let shard = &mut self.shards[host];
        shard.host.socket_mut().push_inbound(from, bytes);
        shard.active = true;
        Ok(())
    }

    /// Lets every active host process what it was given (and run its timers), and handles its
    /// events. A host's `service` visits every peer each time it finds no event queued, so
    /// events already queued are taken with `check_events`, which does not.
    fn service(&mut self) {
        for host in 0..self.shards.len() {
            if !self.shards[host].active {
                continue;
            }
            let mut queued = false;
            loop {
                let shard = &mut self.shards[host].host;
                let event = if queued {
                    shard.check_events()
                } else {
                    match shard.service() {
                        Ok(event) => event,
                        Err(never) => match never {},
                    }
                };
                let Some(event) = event else {
                    if queued && self.shards[host].host.socket().has_inbound() {
                        // A service reads at most 256 datagrams: another reads the rest.
                        queued = false;
                        continue;
                    }
                    break;
                };
                queued = true;
                match event {
                    Event::Receive {
                        peer,
                        channel_id: _,
                        packet,
                    } => {
                        let peer = peer.id();
                        self.received(host, peer, packet);
                    }
                    event => match event.no_ref() {
                        EventNoRef::Connect { peer, .. } => self.connected(host, peer),
                        EventNoRef::Disconnect { peer, .. } => self.disconnected(host, peer),
                        EventNoRef::Receive { .. } => {}
                    },
                }
            }
        }
    }

    fn connected(&mut self, host: usize, peer: PeerID) {
        let shard = &mut self.shards[host];
        let Some(address) = shard.host.peer(peer).address() else {
            return;
        };
        match self.routes.get_mut(&address) {
            Some(route) => route.peers += 1,
            None => {
                shard.load += 1;
                self.routes.insert(
                    address,
                    Route {
                        host,
                        peers: 1,
                        since: Instant::now(),
                    },
                );
            }
        }
        self.state.services.metrics.enet_peers.inc();
        self.generation = self.generation.wrapping_add(1);
        let key = PeerKey {
            host: host as u16,
            peer: peer.0 as u16,
            generation: self.generation,
        };
        let pong_wait =
            u32::try_from(self.state.services.config.socket.pong_wait_ms).unwrap_or(u32::MAX);
        let enet_peer = shard.host.peer_mut(peer);
        // ENet's own keep-alive: a peer that acknowledges nothing for pong_wait_ms is gone.
        enet_peer.set_timeout(0, pong_wait.min(5_000), pong_wait);
        if !self.config.throttle_unreliable {
            // ENet drops unreliable packets when the round trip grows; a busy turn looks like a
            // congested link to it, and the states it would drop are what the players wait for.
            // A throttle at its full scale drops nothing; no deceleration keeps it there.
            enet_peer.set_throttle(
                consts::PEER_PACKET_THROTTLE_INTERVAL,
                consts::PEER_PACKET_THROTTLE_SCALE,
                0,
            );
        }
        match connection::take_place(&self.state, address.ip()) {
            Ok(admission) => {
                let deadline = Instant::now()
                    + Duration::from_millis(self.state.services.config.limits.handshake_timeout_ms);
                shard.peers[peer.0] = Some(PeerEntry::awaiting_join(
                    key,
                    address,
                    admission,
                    self.config.packets_per_peer_per_sec,
                    self.config.bytes_per_peer_per_sec,
                ));
                self.awaiting_join.push_back((deadline, key));
            }
            Err(_) => {
                enet_peer.disconnect_later(peer::DISCONNECT_FULL);
                shard.peers[peer.0] = Some(PeerEntry::refused(key, address, Ending::JoinFailed));
            }
        }
    }

    fn disconnected(&mut self, host: usize, peer: PeerID) {
        let shard = &mut self.shards[host];
        let Some(entry) = shard.peers.get_mut(peer.0).and_then(Option::take) else {
            return;
        };
        if let Some(route) = self.routes.get_mut(&entry.address) {
            route.peers = route.peers.saturating_sub(1);
            if route.peers == 0 {
                self.routes.remove(&entry.address);
                shard.load = shard.load.saturating_sub(1);
            }
        }
        gone(&self.state, &entry, Ending::ClientClosed);
        // Dropping the entry drops the session task's inbound queue: the task ends, and with it
        // the session.
    }

    fn received(&mut self, host: usize, peer: PeerID, packet: Packet) {
        let max_message = self.state.services.config.socket.max_message_size_bytes;
        let shard = &mut self.shards[host];
        let Some(Some(entry)) = shard.peers.get_mut(peer.0) else {
            return;
        };
        let data = packet.data();
        let key = entry.key;
        if data.len() > max_message {
            let error = Envelope::error(
                "",
                error_code::BAD_INPUT,
                format!(
                    "Message too big: {} bytes, at most {max_message}.",
                    data.len()
                ),
            );
            match &entry.phase {
                Phase::Joined { session, .. } => {
                    peer::push(session, &error);
                }
                Phase::AwaitingJoin { .. } => {
                    send_now(shard, peer, &error);
                    self.close(key, Ending::JoinFailed);
                }
                Phase::Closing => {}
            }
            return;
        }
        match &mut entry.phase {
            Phase::Closing => {}
            Phase::Joined { session, inbound } => match realtime::decode_protobuf(data) {
                Ok(envelope) => {
                    if inbound.try_send(envelope).is_err() {
                        self.close(key, Ending::QueueFull);
                    }
                }
                Err(error) => {
                    peer::push(
                        session,
                        &Envelope::error(error.cid(), error.code(), error.to_string()),
                    );
                }
            },
            Phase::AwaitingJoin { admission, .. } => {
                let (cid, token, metadata) = match first_join(data) {
                    Ok(join) => join,
                    Err(refusal) => {
                        send_now(shard, peer, &refusal);
                        self.close(key, Ending::JoinFailed);
                        return;
                    }
                };
                let claims = match self.state.services.matches.tokens.verify(&token) {
                    Ok(claims) => claims,
                    Err(error) => {
                        let refusal = super::dispatch::join_refusal(&self.state, cid, error);
                        send_now(shard, peer, &refusal);
                        self.close(key, Ending::JoinFailed);
                        return;
                    }
                };
                let Some(admission) = admission.take() else {
                    return;
                };
                let outbox = Outbox::with_consumer(
                    self.state.services.config.socket.outgoing_queue_size,
                    Arc::new(PeerWake {
                        wakes: self.wakes.clone(),
                        key,
                        drained: tokio::sync::Notify::new(),
                    }),
                );
                let guard = self.state.services.registry.register_with_outbox(
                    admission,
                    claims.uid,
                    &claims.usn,
                    Format::Protobuf,
                    outbox,
                );
                let (sender, receiver) = mpsc::channel(INBOUND_QUEUE);
                entry.phase = Phase::Joined {
                    session: guard.entry.clone(),
                    inbound: sender,
                };
                let state = self.state.clone();
                self.state.sockets.spawn(peer::serve_session(
                    guard,
                    cid,
                    token,
                    claims.match_id(),
                    metadata,
                    receiver,
                    state,
                    key,
                    self.command_sender.clone(),
                ));
            }
        }
    }

    /// Sends what every woken outbox holds, each message on the channel its delivery asks for.
    fn drain_outboxes(&mut self) {
        std::mem::swap(&mut *self.wakes.dirty.lock(), &mut self.draining);
        let mut closed = Vec::new();
        for key in self.draining.drain(..) {
            let Some(shard) = self.shards.get_mut(usize::from(key.host)) else {
                continue;
            };
            let Some(Some(entry)) = shard.peers.get_mut(usize::from(key.peer)) else {
                continue;
            };
            if entry.key != key {
                continue;
            }
            let Phase::Joined { session, .. } = &entry.phase else {
                continue;
            };
            let drained = session.outbox.drain();
            if let Some(why) = drained.closed {
                closed.push((key, Ending::of_closed(why)));
                continue;
            }
            shard.active = true;
            let peer = shard.host.peer_mut(PeerID(usize::from(key.peer)));
            let channels = peer.channel_count();
            for message in drained.messages {
                let Frame::Binary(bytes) = message else {
                    continue;
                };
                let (channel, packet) = match delivery(&bytes) {
                    Delivery::Unreliable if channels > 1 => (1, Packet::unreliable(&bytes[..])),
                    _ => (0, Packet::reliable(&bytes[..])),
                };
                // Fails only for a peer no longer connected, whose disconnect event follows.
                let _ = peer.send(channel, &packet);
            }
        }
        for (key, ending) in closed {
            self.close(key, ending);
        }
    }

    /// A peer that announced a packet larger than ENet will reassemble (twice
    /// `socket.max_message_size_bytes`): told why (an `error`, code 3), then disconnected (data
    /// 4), since the rest of that packet would stall its channel for good.
    fn refuse_oversized(&mut self, host: usize, peer: PeerID, key: PeerKey, announced: usize) {
        let max_message = self.state.services.config.socket.max_message_size_bytes;
        let error = Envelope::error(
            "",
            error_code::BAD_INPUT,
            format!("Message too big: {announced} bytes, at most {max_message}."),
        );
        let shard = &mut self.shards[host];
        let Some(Some(entry)) = shard.peers.get(peer.0) else {
            return;
        };
        if matches!(entry.phase, Phase::Closing) {
            return;
        }
        // Straight into the peer's reliable queue, ahead of the disconnect that follows it.
        send_now(shard, peer, &error);
        self.close(key, Ending::MessageTooBig);
    }

    /// Starts disconnecting a peer (what is queued for it is sent first) and notes why.
    fn close(&mut self, key: PeerKey, ending: Ending) {
        let Some(shard) = self.shards.get_mut(usize::from(key.host)) else {
            return;
        };
        let Some(Some(entry)) = shard.peers.get_mut(usize::from(key.peer)) else {
            return;
        };
        if entry.key != key || matches!(entry.phase, Phase::Closing) {
            return;
        }
        entry.phase = Phase::Closing;
        entry.ending = Some(ending);
        shard.active = true;
        shard
            .host
            .peer_mut(PeerID(usize::from(key.peer)))
            .disconnect_later(peer::disconnect_code(ending));
    }

    /// Closes peers that connected but did not join within `limits.handshake_timeout_ms`.
    fn expire_handshakes(&mut self) {
        let now = Instant::now();
        while let Some(&(deadline, key)) = self.awaiting_join.front() {
            if deadline > now {
                break;
            }
            self.awaiting_join.pop_front();
            let waiting = self
                .shards
                .get(usize::from(key.host))
                .and_then(|shard| shard.peers.get(usize::from(key.peer)))
                .and_then(Option::as_ref)
                .is_some_and(|entry| {
                    entry.key == key && matches!(entry.phase, Phase::AwaitingJoin { .. })
                });
            if waiting {
                self.close(key, Ending::KeepAliveTimeout);
            }
        }
    }

    /// Writes every active host's datagrams.
    async fn flush(&mut self) {
        let metrics = self.state.services.metrics.clone();
        for shard in &mut self.shards {
            if !std::mem::take(&mut shard.active) {
                continue;
            }
            shard.host.flush();
            let (bytes, datagrams) = shard.host.socket().outbound();
            if datagrams.is_empty() {
                continue;
            }
            let (sent, calls) = self.io.send(bytes, datagrams, SEND_PATIENCE).await;
            metrics
                .enet_syscalls
                .with_label_values(&["sendmmsg"])
                .inc_by(calls as u64);
            metrics
                .enet_datagrams
                .with_label_values(&["out"])
                .inc_by(sent as u64);
            let unsent = datagrams.len() - sent;
            if unsent > 0 {
                metrics
                    .enet_dropped
                    .with_label_values(&["send_failed"])
                    .inc_by(unsent as u64);
            }
            shard.host.socket_mut().clear_outbound();
        }
    }

    /// Forgets addresses whose connection attempt never completed.
    fn sweep_routes(&mut self, now: Instant) {
        let shards = &mut self.shards;
        self.routes.retain(|_, route| {
            let keep = route.peers > 0 || now.duration_since(route.since) < ROUTE_LINGER;
            if !keep {
                shards[route.host].load = shards[route.host].load.saturating_sub(1);
            }
            keep
        });
    }

    /// Tells every peer the server is going, and gives them a moment to hear it.
    async fn shut_down(mut self) {
        let keys: Vec<PeerKey> = self
            .shards
            .iter()
            .flat_map(|shard| shard.peers.iter().flatten().map(|entry| entry.key))
            .collect();
        self.drain_outboxes();
        for key in keys {
            self.close(key, Ending::ServerShutdown);
        }
        let deadline = Instant::now() + SHUTDOWN_LINGER;
        while Instant::now() < deadline && self.state.services.metrics.enet_peers.get() > 0 {
            for shard in &mut self.shards {
                shard.active = true;
            }
            self.receive();
            self.service();
            self.flush().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for shard in &mut self.shards {
            for entry in shard.peers.iter_mut().filter_map(Option::take) {
                gone(&self.state, &entry, Ending::ServerShutdown);
            }
        }
    }
}

/// Counts a peer gone, ended for the reason the server gave it or else `otherwise`.
fn gone(state: &AppState, entry: &PeerEntry, otherwise: Ending) {
    state.services.metrics.enet_peers.dec();
    connection::record_ending(state, Transport::Enet, entry.ending.unwrap_or(otherwise));
}

/// Sends one envelope to a peer that has no session (yet): its join's refusal.
fn send_now(shard: &mut Shard, peer: PeerID, envelope: &Envelope) {
    shard.active = true;
    let bytes = realtime::encode_protobuf(envelope);
    let _ = shard
        .host
        .peer_mut(peer)
        .send(0, &Packet::reliable(&bytes[..]));
}

/// The first packet's join: (cid, token, metadata), or the error to answer with.
fn first_join(data: &[u8]) -> Result<(String, String, HashMap<String, String>), Box<Envelope>> {
    let envelope = realtime::decode_protobuf(data).map_err(|error| {
        Box::new(Envelope::error(
            error.cid(),
            error.code(),
            error.to_string(),
        ))
    })?;
    let cid = envelope.cid;
    match envelope.message {
        Some(Message::MatchJoin(join)) => match join.id {
            Some(match_join::Id::Token(token)) => Ok((cid, token, join.metadata)),
            _ => Err(not_a_join(cid)),
        },
        _ => Err(not_a_join(cid)),
    }
}

fn not_a_join(cid: String) -> Box<Envelope> {
    Box::new(Envelope::error(
        cid,
        error_code::BAD_INPUT,
        "The first packet must be match_join with a token.",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every loop's socket is on the one port, and each client address always reaches the same
    /// socket: a peer's datagrams never cross loops.
    #[tokio::test]
    async fn the_loops_share_one_port_and_each_client_sticks_to_one_loop() {
        let config = EnetConfig {
            listen: "127.0.0.1:0".into(),
            loops: 3,
            ..EnetConfig::default()
        };
        let sockets = bind(&config).expect("bind");
        assert_eq!(sockets.len(), 3);
        let port = sockets[0].local_addr().expect("address").port();
        assert_ne!(port, 0);
        for socket in &sockets {
            assert_eq!(socket.local_addr().expect("address").port(), port);
        }
        let target: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
        let clients: Vec<std::net::UdpSocket> = (0..24)
            .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").expect("client"))
            .collect();
        // Each client sends three datagrams; every one must arrive, each client's on one socket.
        for _ in 0..3 {
            for client in &clients {
                client.send_to(b"hello", target).expect("send");
            }
        }
        let (arrived, mut arrivals) = mpsc::unbounded_channel();
        for (index, socket) in sockets.into_iter().enumerate() {
            let arrived = arrived.clone();
            tokio::spawn(async move {
                let mut buffer = [0u8; 64];
                while let Ok((_, from)) = socket.recv_from(&mut buffer).await {
                    if arrived.send((index, from)).is_err() {
                        return;
                    }
                }
            });
        }
        let mut seen: HashMap<SocketAddr, (usize, usize)> = HashMap::new();
        for received in 0..3 * clients.len() {
            let (index, from) = tokio::time::timeout(Duration::from_secs(10), arrivals.recv())
                .await
                .unwrap_or_else(|_| panic!("only {received} datagrams arrived"))
                .expect("the readers run");
            let entry = seen.entry(from).or_insert((index, 0));
            assert_eq!(entry.0, index, "{from} reached two loops");
            entry.1 += 1;
        }
        assert_eq!(seen.len(), clients.len());
        assert!(seen.values().all(|&(_, count)| count == 3));
    }

    #[test]
    fn each_loop_gets_its_share_of_the_limits() {
        let config = EnetConfig {
            loops: 3,
            max_peers: 1000,
            connects_per_sec: 100,
            ..EnetConfig::default()
        };
        let share = config.per_loop();
        assert_eq!((share.max_peers, share.connects_per_sec), (334, 34));
        let one = EnetConfig {
            loops: 8,
            max_peers: 2,
            ..EnetConfig::default()
        };
        assert_eq!(one.loop_count(), 2, "never more loops than peers");
    }
}
