//! Muster's ENet transport, client side: a worker's players share a few ENet client hosts
//! (rusty_enet, ENet 1.3), each one UDP socket holding up to [`PEERS_PER_HOST`] peers, driven by
//! one task. A player's connection is a peer: what it sends is queued for the task, which sends
//! every player's packets of a turn in one flush per host; what the server sends reaches the
//! player through its own queue.
//!
//! Envelopes are protobuf, one per ENet packet, on channel 0 (reliable) — or channel 1
//! (unreliable) when asked; the server sends unreliable `match_data` on channel 1.
//!
//! Workers are single-threaded, so the shared state is an `Rc` with `RefCell`s; no borrow is
//! held across an `.await`.

use std::cell::RefCell;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use muster_proto::realtime::{self, Envelope};
use rusty_enet::{EventNoRef, Host, HostSettings, Packet, PacketReceived, PeerID, Socket, MTU_MAX};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot, Notify};

use super::failure::Failure;

/// Peers on one client host (and so on one UDP socket, one source port): small, because each
/// service and flush visits every peer of the host and only busy hosts are serviced.
pub const PEERS_PER_HOST: usize = 200;
/// How often the hosts' timers run when nothing happens.
const SERVICE_INTERVAL: Duration = Duration::from_millis(5);

/// What the server sent a peer.
enum Inbound {
    Packet(Vec<u8>),
    Disconnected,
}

/// A packet a player asked to send.
struct Outbound {
    host: usize,
    peer: PeerID,
    channel: u8,
    bytes: Vec<u8>,
}

/// A peer slot's player: where its packets go, and who waits for the connect.
struct Slot {
    /// Which player holds it (peer ids are reused once free).
    generation: u64,
    inbound: mpsc::UnboundedSender<Inbound>,
    connecting: Option<oneshot::Sender<bool>>,
}

struct ClientHost {
    host: Host<TokioUdp>,
    socket: Rc<UdpSocket>,
    slots: Vec<Option<Slot>>,
    used: usize,
}

/// The worker's ENet client hosts and the task that drives them (started on first use).
#[derive(Default)]
pub struct EnetClients {
    shared: Rc<Shared>,
}

#[derive(Default)]
struct Shared {
    hosts: RefCell<Vec<ClientHost>>,
    outbound: RefCell<Vec<Outbound>>,
    /// Peers whose players let go of them, to disconnect.
    closing: RefCell<Vec<(usize, PeerID, u64)>>,
    /// Hosts with a connection attempt to send.
    connecting: RefCell<Vec<usize>>,
    generation: std::cell::Cell<u64>,
    wake: Notify,
    running: std::cell::Cell<bool>,
}

/// One player's connection (an ENet peer).
pub struct EnetConn {
    shared: Rc<Shared>,
    host: usize,
    peer: PeerID,
    generation: u64,
    inbound: mpsc::UnboundedReceiver<Inbound>,
}

impl EnetClients {
    /// Connects a peer to `server` (from `source` when given) with two channels.
    pub async fn connect(
        &self,
        server: SocketAddr,
        source: Option<IpAddr>,
    ) -> Result<EnetConn, Failure> {
        let shared = self.shared.clone();
        if !shared.running.replace(true) {
            tokio::task::spawn_local(drive(shared.clone()));
        }
        let (inbound_sender, inbound) = mpsc::unbounded_channel();
        let (connected_sender, connected) = oneshot::channel();
        let generation = shared.generation.get() + 1;
        shared.generation.set(generation);
        let (host, peer) = {
            let mut hosts = shared.hosts.borrow_mut();
            let index = match hosts.iter().position(|h| h.used < PEERS_PER_HOST) {
                Some(index) => index,
                None => {
                    hosts.push(ClientHost::bind(server, source)?);
                    hosts.len() - 1
                }
            };
            let client = &mut hosts[index];
            let peer = client
                .host
                .connect(server, 2, 0)
                .map_err(|_| Failure::EnetConnect)?
                .id();
            client.slots[peer.0] = Some(Slot {
                generation,
                inbound: inbound_sender,
                connecting: Some(connected_sender),
            });
            client.used += 1;
            (index, peer)
        };
        shared.connecting.borrow_mut().push(host);
        shared.wake.notify_one();
        let conn = EnetConn {
            shared,
            host,
            peer,
            generation,
            inbound,
        };
        match connected.await {
            Ok(true) => Ok(conn),
            _ => Err(Failure::EnetConnect),
        }
    }
}

impl ClientHost {
    fn bind(server: SocketAddr, source: Option<IpAddr>) -> Result<ClientHost, Failure> {
        let local = match (source, server) {
            (Some(ip), _) => SocketAddr::new(ip, 0),
            (None, SocketAddr::V4(_)) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
            (None, SocketAddr::V6(_)) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
        };
        let socket = std::net::UdpSocket::bind(local).map_err(|_| Failure::WsBind)?;
        socket.set_nonblocking(true).map_err(|_| Failure::WsBind)?;
        let socket = Rc::new(UdpSocket::from_std(socket).map_err(|_| Failure::WsBind)?);
        let host = Host::new(
            TokioUdp(socket.clone()),
            HostSettings {
                peer_limit: PEERS_PER_HOST,
                channel_limit: 2,
                ..Default::default()
            },
        )
        .map_err(|_| Failure::WsBind)?;
        Ok(ClientHost {
            host,
            socket,
            slots: (0..PEERS_PER_HOST).map(|_| None).collect(),
            used: 0,
        })
    }
}

impl EnetConn {
    /// Queues `envelope` (reliable on channel 0, or unreliable on channel 1).
    pub fn send(&self, envelope: &Envelope, reliable: bool) {
        self.shared.outbound.borrow_mut().push(Outbound {
            host: self.host,
            peer: self.peer,
            channel: if reliable { 0 } else { 1 },
            bytes: realtime::encode_protobuf(envelope),
        });
        self.shared.wake.notify_one();
    }

    /// The next envelope from the server.
    pub async fn recv(&mut self) -> Result<Envelope, Failure> {
        match self.inbound.recv().await {
            Some(Inbound::Packet(bytes)) => {
                realtime::decode_protobuf(&bytes).map_err(|_| Failure::EnetIo)
            }
            Some(Inbound::Disconnected) | None => Err(Failure::EnetClosed),
        }
    }
}

impl Drop for EnetConn {
    /// Letting go of a connection disconnects its peer.
    fn drop(&mut self) {
        self.shared
            .closing
            .borrow_mut()
            .push((self.host, self.peer, self.generation));
        self.shared.wake.notify_one();
    }
}

/// Drives every host of the worker: sends what players queued, reads what came, runs ENet's
/// timers. Ends when the worker's runtime does.
async fn drive(shared: Rc<Shared>) {
    let mut next_timers = tokio::time::Instant::now() + SERVICE_INTERVAL;
    loop {
        let sockets: Vec<Rc<UdpSocket>> = shared
            .hosts
            .borrow()
            .iter()
            .map(|h| h.socket.clone())
            .collect();
        let readable = async {
            if sockets.is_empty() {
                std::future::pending::<()>().await;
            }
            let waits = sockets.iter().map(|socket| Box::pin(socket.readable()));
            futures_util::future::select_all(waits).await.1
        };
        let mut busy = None;
        tokio::select! {
            index = readable => busy = Some(index),
            () = shared.wake.notified() => {}
            () = tokio::time::sleep_until(next_timers) => {}
        }
        // Let the players already woken queue their sends first, so they share this turn.
        tokio::task::yield_now().await;
        let timers_due = tokio::time::Instant::now() >= next_timers;
        if timers_due {
            next_timers = tokio::time::Instant::now() + SERVICE_INTERVAL;
        }
        turn(&shared, busy, timers_due);
    }
}

/// One turn: queues what players sent, disconnects what they let go, then services and flushes
/// the hosts that have something to do (each service visits every peer of its host): those
/// given packets, the one whose socket is readable, and all of them when the timers are due.
fn turn(shared: &Shared, readable: Option<usize>, timers_due: bool) {
    let mut hosts = shared.hosts.borrow_mut();
    let mut active = vec![timers_due; hosts.len()];
    if let Some(index) = readable {
        active[index] = true;
    }
    for host in shared.connecting.borrow_mut().drain(..) {
        active[host] = true;
    }
    for Outbound {
        host,
        peer,
        channel,
        bytes,
    } in shared.outbound.borrow_mut().drain(..)
    {
        let packet = if channel == 0 {
            Packet::reliable(bytes)
        } else {
            Packet::unreliable(bytes)
        };
        // A peer no longer connected fails here; its player hears of the disconnect.
        let _ = hosts[host].host.peer_mut(peer).send(channel, &packet);
        active[host] = true;
    }
    for (host, peer, generation) in shared.closing.borrow_mut().drain(..) {
        let client = &mut hosts[host];
        let held = &mut client.slots[peer.0];
        if held
            .as_ref()
            .is_some_and(|slot| slot.generation == generation)
        {
            *held = None;
            active[host] = true;
            client.used -= 1;
            client.host.peer_mut(peer).disconnect_now(0);
        }
    }
    for (client, _) in hosts.iter_mut().zip(active).filter(|(_, active)| *active) {
        loop {
            let event = match client.host.service() {
                Ok(Some(event)) => event.no_ref(),
                Ok(None) => break,
                Err(_) => break,
            };
            match event {
                EventNoRef::Connect { peer, .. } => {
                    if let Some(slot) = client.slots[peer.0].as_mut() {
                        if let Some(connected) = slot.connecting.take() {
                            let _ = connected.send(true);
                        }
                    }
                }
                EventNoRef::Disconnect { peer, .. } => {
                    if let Some(slot) = client.slots[peer.0].take() {
                        client.used -= 1;
                        match slot.connecting {
                            Some(connecting) => {
                                let _ = connecting.send(false);
                            }
                            None => {
                                let _ = slot.inbound.send(Inbound::Disconnected);
                            }
                        }
                    }
                }
                EventNoRef::Receive { peer, packet, .. } => {
                    if let Some(slot) = client.slots[peer.0].as_ref() {
                        let _ = slot.inbound.send(Inbound::Packet(packet.data().to_vec()));
                    }
                }
            }
        }
        client.host.flush();
    }
}

/// rusty_enet's socket over tokio's UDP socket (non-blocking; readiness comes from tokio).
struct TokioUdp(Rc<UdpSocket>);

impl Socket for TokioUdp {
    type Address = SocketAddr;
    type Error = io::Error;

    fn send(&mut self, address: SocketAddr, buffer: &[u8]) -> Result<usize, io::Error> {
        match self.0.try_send_to(buffer, address) {
            Ok(sent) => Ok(sent),
            // A full socket buffer drops the datagram, as a network would; ENet resends
            // what was reliable.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(e),
        }
    }

    fn receive(
        &mut self,
        buffer: &mut [u8; MTU_MAX],
    ) -> Result<Option<(SocketAddr, PacketReceived)>, io::Error> {
        match self.0.try_recv_from(buffer) {
            Ok((len, from)) => Ok(Some((from, PacketReceived::Complete(len)))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            // A refused earlier datagram (ICMP) is not this socket's failure.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(None),
            Err(e) => Err(e),
        }
    }
}
