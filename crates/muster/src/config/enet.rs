//! The `[enet]` section: the reliable-UDP transport for matches and rooms (`crate::net::enet`).

use serde::{Deserialize, Serialize};

/// ENet's peer ids are 12 bits: one ENet host holds at most this many peers, so a node holds
/// `max_peers` on as many hosts as that takes, all on one UDP socket.
pub const MAX_PEERS_PER_HOST: usize = 4095;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnetConfig {
    /// UDP address of the ENet transport; empty disables it.
    pub listen: String,
    /// Port given to clients in room connection info (`enet.port`); 0: the listener's port.
    pub public_port: u16,
    /// Most ENet peers connected at once on this node (players and handshakes alike).
    pub max_peers: usize,
    /// Peers per ENet host (at most 4,095, ENet's peer-id limit): the node runs up to
    /// `max_peers / peers_per_host` hosts on its one socket, made as client addresses arrive. Each service and flush of a host
    /// visits all its peers, and a turn touches only the hosts that got datagrams or have
    /// something to send, so smaller hosts cost less per turn. Every peer of one client address
    /// lives on one host.
    pub peers_per_host: usize,
    /// Datagrams read or written per system call (`recvmmsg` / `sendmmsg`).
    pub batch_size: usize,
    /// Packets one peer may send per second (twice this at once); more are dropped and counted.
    pub packets_per_peer_per_sec: u32,
    /// Bytes one peer may send per second (twice this at once); more are dropped and counted.
    pub bytes_per_peer_per_sec: u32,
    /// Connection attempts accepted per second from all addresses together (each address is
    /// also held to `limits.connect_per_ip_per_sec`); more are dropped unanswered.
    pub connects_per_sec: u32,
    /// The bandwidth a peer is told the node takes in, bytes/s; ENet clients throttle their
    /// sending to it. 0: unlimited.
    pub incoming_bandwidth_bytes_per_sec: u32,
    /// The bandwidth the node sends to each peer at most, bytes/s (ENet's own throttle).
    /// 0: unlimited.
    pub outgoing_bandwidth_bytes_per_sec: u32,
    /// How often ENet's timers (resends, pings, timeouts) run when no datagram arrives, in ms.
    pub service_interval_ms: u64,
    /// Least time between two turns of the transport's loop, in ms: what arrives and what the
    /// matches send meanwhile is handled in one pass over the peers (each pass visits every
    /// peer of a busy host). 0 (the default): a turn per wake-up. Measured at 2,000 players, a
    /// gap of 1 or 2 ms cost far more than its nominal value (RTT p50 12 → 80 ms: under load
    /// tokio's timers fire late), so it is only for nodes that trade latency for CPU.
    pub turn_interval_ms: u64,
    /// The socket's kernel receive and send buffers, in bytes.
    pub socket_buffer_bytes: usize,
    /// Transport loops, each with its own UDP socket on the one port (`SO_REUSEPORT`: the
    /// kernel gives each client address to one socket, so a client's datagrams always reach the
    /// same loop) and its own hosts; `max_peers` and `connects_per_sec` are shared out among
    /// them. 0 (the default): one per core.
    pub loops: usize,
    /// Let ENet drop unreliable packets (match states) to a peer whose round trip grows (its
    /// packet throttle). Off: a busy node's slower turns look like congestion to ENet, and the
    /// states it would drop are what players wait for.
    pub throttle_unreliable: bool,
}

impl Default for EnetConfig {
    fn default() -> Self {
        EnetConfig {
            listen: "0.0.0.0:7351".into(),
            public_port: 0,
            max_peers: 16_384,
            peers_per_host: 512,
            batch_size: 64,
            packets_per_peer_per_sec: 240,
            bytes_per_peer_per_sec: 256 * 1024,
            connects_per_sec: 2_000,
            incoming_bandwidth_bytes_per_sec: 0,
            outgoing_bandwidth_bytes_per_sec: 0,
            service_interval_ms: 10,
            turn_interval_ms: 0,
            socket_buffer_bytes: 4 * 1024 * 1024,
            loops: 0,
            throttle_unreliable: false,
        }
    }
}

impl EnetConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !self.listen.is_empty() && self.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(format!(
                "enet.listen must be an IP:port address or empty, not {:?}",
                self.listen
            ));
        }
        if self.max_peers == 0 || self.max_peers > 64 * MAX_PEERS_PER_HOST {
            return Err(format!(
                "enet.max_peers must be between 1 and {}",
                64 * MAX_PEERS_PER_HOST
            ));
        }
        if !(1..=MAX_PEERS_PER_HOST).contains(&self.peers_per_host) {
            return Err(format!(
                "enet.peers_per_host must be between 1 and {MAX_PEERS_PER_HOST}"
            ));
        }
        if self.hosts() > 1024 {
            return Err("enet.max_peers / enet.peers_per_host must be at most 1024 hosts".into());
        }
        if !(1..=1024).contains(&self.batch_size) {
            return Err("enet.batch_size must be between 1 and 1024".into());
        }
        if self.packets_per_peer_per_sec == 0
            || self.bytes_per_peer_per_sec == 0
            || self.connects_per_sec == 0
        {
            return Err(
                "enet.packets_per_peer_per_sec, bytes_per_peer_per_sec and connects_per_sec must be at least 1"
                    .into(),
            );
        }
        if !(1..=1000).contains(&self.service_interval_ms) {
            return Err("enet.service_interval_ms must be between 1 and 1000".into());
        }
        if self.turn_interval_ms > 100 {
            return Err("enet.turn_interval_ms must be at most 100".into());
        }
        if self.loops > 64 {
            return Err("enet.loops must be at most 64 (0: one per core)".into());
        }
        if self.socket_buffer_bytes < 64 * 1024 {
            return Err("enet.socket_buffer_bytes must be at least 65536".into());
        }
        Ok(())
    }

    /// How many transport loops run: `loops`, or one per core, never more than `max_peers`.
    pub fn loop_count(&self) -> usize {
        let loops = match self.loops {
            0 => std::thread::available_parallelism().map_or(1, |cores| cores.get()),
            loops => loops,
        };
        loops.min(self.max_peers).max(1)
    }

    /// One loop's part of the node's settings: its share of `max_peers` and `connects_per_sec`.
    pub fn per_loop(&self) -> EnetConfig {
        let loops = self.loop_count();
        EnetConfig {
            max_peers: self.max_peers.div_ceil(loops),
            connects_per_sec: self.connects_per_sec.div_ceil(loops as u32),
            ..self.clone()
        }
    }

    /// How many ENet hosts `max_peers` takes.
    pub fn hosts(&self) -> usize {
        self.max_peers.div_ceil(self.peers_per_host)
    }
}
