//! An ENet client for the tests (rusty_enet, ENet 1.3 transpiled from the C library, on its own
//! UDP socket), and a lossy UDP relay that drops and reorders datagrams between a client and
//! the server.

use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use muster_proto::realtime::{self, Envelope, Message};
use rusty_enet::{EventNoRef, Host, HostSettings, Packet, PeerID};

const WAIT: Duration = Duration::from_secs(10);

/// What the server sent.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // a few at a time, in a test
pub enum Received {
    Envelope { channel: u8, envelope: Envelope },
    Disconnected { data: u32 },
}

pub struct EnetClient {
    host: Host<UdpSocket>,
    peer: PeerID,
    pending: VecDeque<Received>,
}

impl EnetClient {
    /// Connects with two channels (0 reliable, 1 unreliable).
    pub async fn connect(server: SocketAddr) -> EnetClient {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let mut host = Host::new(
            socket,
            HostSettings {
                peer_limit: 1,
                channel_limit: 2,
                ..Default::default()
            },
        )
        .expect("ENet host");
        let peer = host.connect(server, 2, 0).expect("connect").id();
        let mut client = EnetClient {
            host,
            peer,
            pending: VecDeque::new(),
        };
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            match client.host.service().expect("service").map(|e| e.no_ref()) {
                Some(EventNoRef::Connect { .. }) => return client,
                Some(EventNoRef::Disconnect { data, .. }) => panic!("refused ({data})"),
                Some(EventNoRef::Receive { .. }) => {}
                None => {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "ENet connect timed out"
                    );
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
    }

    pub fn send(&mut self, envelope: &Envelope) {
        self.send_raw(0, &realtime::encode_protobuf(envelope));
    }

    pub fn send_raw(&mut self, channel: u8, bytes: &[u8]) {
        let packet = if channel == 0 {
            Packet::reliable(bytes)
        } else {
            Packet::unreliable(bytes)
        };
        self.host
            .peer_mut(self.peer)
            .send(channel, &packet)
            .expect("send");
        self.host.flush();
    }

    /// The next thing the server sent (within the wait), or `None` if nothing came.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Received> {
        match self.pending.pop_front() {
            Some(received) => Some(received),
            None => self.read_within(wait).await,
        }
    }

    /// What the socket brings next, ignoring what is pending.
    async fn read_within(&mut self, wait: Duration) -> Option<Received> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match self.host.service().expect("service").map(|e| e.no_ref()) {
                Some(EventNoRef::Receive {
                    channel_id, packet, ..
                }) => {
                    let envelope = realtime::decode_protobuf(packet.data()).expect("an envelope");
                    return Some(Received::Envelope {
                        channel: channel_id,
                        envelope,
                    });
                }
                Some(EventNoRef::Disconnect { data, .. }) => {
                    return Some(Received::Disconnected { data })
                }
                Some(EventNoRef::Connect { .. }) => {}
                None => {
                    if tokio::time::Instant::now() >= deadline {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
    }

    pub async fn next(&mut self) -> Received {
        self.next_within(WAIT)
            .await
            .expect("something from the server in time")
    }

    /// The next envelope of `kind` (with its channel), keeping others for later.
    pub async fn next_kind(&mut self, kind: &str) -> (u8, Envelope) {
        let is = |received: &Received| {
            matches!(received, Received::Envelope { envelope, .. }
                if envelope.message.as_ref().map(Message::kind) == Some(kind))
        };
        if let Some(i) = self.pending.iter().position(is) {
            if let Some(Received::Envelope { channel, envelope }) = self.pending.remove(i) {
                return (channel, envelope);
            }
        }
        loop {
            let received = self
                .read_within(WAIT)
                .await
                .unwrap_or_else(|| panic!("no {kind} in time"));
            if is(&received) {
                if let Received::Envelope { channel, envelope } = received {
                    return (channel, envelope);
                }
            }
            if let Received::Disconnected { data } = received {
                panic!("disconnected ({data}) while waiting for {kind}");
            }
            self.pending.push_back(received);
        }
    }

    /// Waits for the server's disconnect; returns its data.
    pub async fn disconnected(&mut self) -> u32 {
        loop {
            if let Received::Disconnected { data } = self.next().await {
                return data;
            }
        }
    }

    /// Disconnects politely and waits for the server's acknowledgement.
    pub async fn disconnect(mut self) {
        self.host.peer_mut(self.peer).disconnect(0);
        let deadline = tokio::time::Instant::now() + WAIT;
        while tokio::time::Instant::now() < deadline {
            if let Some(Received::Disconnected { .. }) =
                self.next_within(Duration::from_millis(50)).await
            {
                return;
            }
        }
        panic!("the server never acknowledged the disconnect");
    }
}

/// A UDP relay between clients and `server` that drops `loss_percent` of datagrams each way
/// and holds back others so that they arrive out of order. Runs on a thread until dropped.
pub struct LossyRelay {
    pub addr: SocketAddr,
    pub dropped: Arc<AtomicU64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LossyRelay {
    pub fn start(server: SocketAddr, loss_percent: u64) -> LossyRelay {
        let outside = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let inside = UdpSocket::bind("127.0.0.1:0").expect("bind");
        outside
            .set_read_timeout(Some(Duration::from_millis(1)))
            .expect("timeout");
        inside
            .set_read_timeout(Some(Duration::from_millis(1)))
            .expect("timeout");
        let addr = outside.local_addr().expect("addr");
        let dropped = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (counter, stopping) = (dropped.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut client: Option<SocketAddr> = None;
            // A deterministic generator: the same run drops the same datagrams.
            let mut seed = 0x2545_F491_4F6C_DD1Du64;
            let mut roll = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed % 100
            };
            let mut held: Vec<(bool, Vec<u8>)> = Vec::new();
            let mut buf = [0u8; 4096];
            while !stopping.load(Ordering::Relaxed) {
                let mut got = Vec::new();
                if let Ok((n, from)) = outside.recv_from(&mut buf) {
                    client = Some(from);
                    got.push((true, buf[..n].to_vec()));
                }
                if let Ok(n) = inside.recv(&mut buf) {
                    got.push((false, buf[..n].to_vec()));
                }
                for datagram in got {
                    let r = roll();
                    if r < loss_percent {
                        counter.fetch_add(1, Ordering::Relaxed);
                    } else if r < loss_percent + 15 {
                        // Held back: sent after the next one in the same direction.
                        held.push(datagram);
                        continue;
                    } else {
                        forward(&outside, &inside, server, client, &datagram);
                    }
                    for late in held.drain(..) {
                        forward(&outside, &inside, server, client, &late);
                    }
                }
            }
        });
        LossyRelay {
            addr,
            dropped,
            stop,
            thread: Some(thread),
        }
    }
}

fn forward(
    outside: &UdpSocket,
    inside: &UdpSocket,
    server: SocketAddr,
    client: Option<SocketAddr>,
    (to_server, bytes): &(bool, Vec<u8>),
) {
    if *to_server {
        let _ = inside.send_to(bytes, server);
    } else if let Some(client) = client {
        let _ = outside.send_to(bytes, client);
    }
}

impl Drop for LossyRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
