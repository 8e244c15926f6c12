//! Many datagrams per system call: `recvmmsg` and `sendmmsg` (through `nix`'s safe wrappers,
//! the workspace forbids `unsafe`) on one non-blocking UDP socket, driven by tokio's readiness.
//!
//! [`Datagrams`] is the other half: the in-memory "socket" each ENet host reads from and writes
//! to. The transport's loop fills hosts' inbound queues from one receive batch and sends what
//! every host wrote in one send batch, so a tick's state for thousands of players costs a few
//! system calls instead of one per player.

use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::ops::Range;
use std::os::fd::AsRawFd as _;

use nix::sys::socket::{
    recvmmsg, sendmmsg, setsockopt, sockopt, ControlMessage, MsgFlags, MultiHeaders,
    SockaddrLike as _, SockaddrStorage,
};
use rusty_enet::{PacketReceived, Socket, MTU_MAX};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Largest datagram read whole; a longer one is truncated by the kernel and dropped.
pub const SLOT_BYTES: usize = MTU_MAX;

/// One datagram received: its sender and its bytes in the receive slots.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    pub from: SocketAddr,
    pub slot: usize,
    pub len: usize,
    /// Longer than [`SLOT_BYTES`]: the kernel cut it.
    pub truncated: bool,
}

/// The UDP socket and the buffers of its batches.
pub struct BatchSocket {
    socket: UdpSocket,
    slots: Vec<Box<[u8; SLOT_BYTES]>>,
    batch: usize,
}

impl BatchSocket {
    /// Wraps a bound socket; sets its kernel buffers to `buffer_bytes` (best effort: the kernel
    /// caps them at `net.core.rmem_max` / `wmem_max`).
    pub fn new(socket: UdpSocket, batch: usize, buffer_bytes: usize) -> BatchSocket {
        if let Err(error) = setsockopt(&socket, sockopt::RcvBuf, &buffer_bytes) {
            tracing::debug!(%error, "cannot set SO_RCVBUF");
        }
        if let Err(error) = setsockopt(&socket, sockopt::SndBuf, &buffer_bytes) {
            tracing::debug!(%error, "cannot set SO_SNDBUF");
        }
        BatchSocket {
            socket,
            slots: (0..batch).map(|_| Box::new([0u8; SLOT_BYTES])).collect(),
            batch,
        }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    pub async fn readable(&self) -> io::Result<()> {
        self.socket.readable().await
    }

    /// The bytes of a datagram [`BatchSocket::receive`] returned.
    pub fn bytes(&self, received: &Received) -> &[u8] {
        &self.slots[received.slot][..received.len]
    }

    /// Reads up to a batch of waiting datagrams in one `recvmmsg`; empty when none is waiting
    /// (tokio's readiness is then cleared, so [`BatchSocket::readable`] waits again). `called`
    /// says whether a system call was made: tokio answers at once while it has not seen the
    /// socket readable.
    pub fn receive(&mut self) -> io::Result<(Vec<Received>, bool)> {
        let fd = self.socket.as_raw_fd();
        let slots = &mut self.slots;
        let batch = self.batch;
        let mut called = false;
        let outcome = self.socket.try_io(Interest::READABLE, || {
            called = true;
            let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(batch, None);
            let mut buffers: Vec<[IoSliceMut; 1]> = slots
                .iter_mut()
                .map(|slot| [IoSliceMut::new(&mut slot[..])])
                .collect();
            let results = recvmmsg(
                fd,
                &mut headers,
                buffers.iter_mut(),
                MsgFlags::MSG_DONTWAIT,
                None,
            )
            .map_err(io::Error::from)?;
            Ok(results
                .enumerate()
                .filter_map(|(slot, message)| {
                    let from = message.address.as_ref().and_then(socket_addr)?;
                    Some(Received {
                        from,
                        slot,
                        len: message.bytes.min(SLOT_BYTES),
                        truncated: message.flags.contains(MsgFlags::MSG_TRUNC),
                    })
                })
                .collect())
        });
        match outcome {
            Ok(received) => Ok((received, called)),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok((Vec::new(), called)),
            Err(error) => Err(error),
        }
    }

    /// Sends `datagrams` (addresses and ranges of `bytes`) with as few `sendmmsg` calls as the
    /// batch size allows. Returns (datagrams sent, system calls made). A full kernel buffer
    /// waits for the socket to be writable again, up to `patience`; what is still unsent then is
    /// dropped (ENet resends what was reliable).
    pub async fn send(
        &self,
        bytes: &[u8],
        datagrams: &[(SocketAddr, Range<usize>)],
        patience: std::time::Duration,
    ) -> (usize, usize) {
        let fd = self.socket.as_raw_fd();
        let mut sent = 0;
        let mut calls = 0;
        let deadline = tokio::time::Instant::now() + patience;
        while sent < datagrams.len() {
            let chunk = &datagrams[sent..datagrams.len().min(sent + self.batch)];
            // tokio answers WouldBlock without calling when it has not seen the socket writable
            // yet: only a call that ran is a system call.
            let mut called = false;
            let outcome = self.socket.try_io(Interest::WRITABLE, || {
                called = true;
                let slices: Vec<[IoSlice; 1]> = chunk
                    .iter()
                    .map(|(_, range)| [IoSlice::new(&bytes[range.clone()])])
                    .collect();
                let addresses: Vec<Option<SockaddrStorage>> = chunk
                    .iter()
                    .map(|(to, _)| Some(SockaddrStorage::from(*to)))
                    .collect();
                let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(chunk.len(), None);
                let results = sendmmsg(
                    fd,
                    &mut headers,
                    slices.iter(),
                    &addresses,
                    [] as [ControlMessage; 0],
                    MsgFlags::MSG_DONTWAIT,
                )
                .map_err(io::Error::from)?;
                Ok(results.count())
            });
            calls += usize::from(called);
            match outcome {
                Ok(0) => break,
                Ok(count) => sent += count,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    let writable = tokio::time::timeout_at(deadline, self.socket.writable());
                    if !matches!(writable.await, Ok(Ok(()))) {
                        break;
                    }
                }
                Err(error) => {
                    // One bad destination (e.g. unreachable) must not stop the others.
                    tracing::debug!(%error, "sendmmsg failed; skipping a datagram");
                    sent += 1;
                }
            }
        }
        (sent, calls)
    }
}

fn socket_addr(address: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = address.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    address
        .as_sockaddr_in6()
        .map(|v6| SocketAddr::V6((*v6).into()))
        .filter(|_| address.len() > 0)
}

/// One ENet host's datagrams in and out, in memory; the transport's loop does the real I/O.
#[derive(Default)]
pub struct Datagrams {
    inbound: VecDeque<(SocketAddr, Range<usize>)>,
    inbound_bytes: Vec<u8>,
    outbound: Vec<(SocketAddr, Range<usize>)>,
    outbound_bytes: Vec<u8>,
}

impl Datagrams {
    /// Queues a received datagram for the host's next service.
    pub fn push_inbound(&mut self, from: SocketAddr, bytes: &[u8]) {
        let start = self.inbound_bytes.len();
        self.inbound_bytes.extend_from_slice(bytes);
        self.inbound
            .push_back((from, start..self.inbound_bytes.len()));
    }

    /// Whether datagrams wait for the host's next service.
    pub fn has_inbound(&self) -> bool {
        !self.inbound.is_empty()
    }

    /// What the host wrote since the last call: the bytes and each datagram's address and range.
    pub fn outbound(&self) -> (&[u8], &[(SocketAddr, Range<usize>)]) {
        (&self.outbound_bytes, &self.outbound)
    }

    pub fn clear_outbound(&mut self) {
        self.outbound.clear();
        self.outbound_bytes.clear();
    }
}

impl Socket for Datagrams {
    type Address = SocketAddr;
    type Error = std::convert::Infallible;

    fn send(&mut self, address: SocketAddr, buffer: &[u8]) -> Result<usize, Self::Error> {
        let start = self.outbound_bytes.len();
        self.outbound_bytes.extend_from_slice(buffer);
        self.outbound
            .push((address, start..self.outbound_bytes.len()));
        Ok(buffer.len())
    }

    fn receive(
        &mut self,
        buffer: &mut [u8; MTU_MAX],
    ) -> Result<Option<(SocketAddr, PacketReceived)>, Self::Error> {
        let Some((from, range)) = self.inbound.pop_front() else {
            self.inbound_bytes.clear();
            return Ok(None);
        };
        let len = range.len();
        buffer[..len].copy_from_slice(&self.inbound_bytes[range]);
        if self.inbound.is_empty() {
            self.inbound_bytes.clear();
        }
        Ok(Some((from, PacketReceived::Complete(len))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_goes_out_in_one_call_and_comes_back_in_one() {
        let a = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let b = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let to = b.local_addr().expect("addr");
        let sender = BatchSocket::new(a, 64, 1 << 20);
        let mut receiver = BatchSocket::new(b, 64, 1 << 20);
        let mut bytes = Vec::new();
        let mut datagrams = Vec::new();
        for i in 0..40u8 {
            let start = bytes.len();
            bytes.extend(std::iter::repeat_n(i, 10 + usize::from(i)));
            datagrams.push((to, start..bytes.len()));
        }
        let (sent, calls) = sender
            .send(&bytes, &datagrams, std::time::Duration::from_secs(1))
            .await;
        assert_eq!((sent, calls), (40, 1), "one sendmmsg for the 40");
        let mut got = Vec::new();
        while got.len() < 40 {
            receiver.readable().await.expect("readable");
            for received in receiver.receive().expect("receive").0 {
                assert!(!received.truncated);
                got.push(receiver.bytes(&received).to_vec());
            }
        }
        for (i, datagram) in got.iter().enumerate() {
            assert_eq!(datagram.len(), 10 + i);
            assert!(datagram.iter().all(|&byte| usize::from(byte) == i));
        }
    }

    #[test]
    fn the_in_memory_socket_hands_datagrams_over_in_order() {
        let mut datagrams = Datagrams::default();
        let from: SocketAddr = "127.0.0.1:9".parse().expect("addr");
        datagrams.push_inbound(from, b"one");
        datagrams.push_inbound(from, b"three");
        let mut buffer = [0u8; MTU_MAX];
        for expected in [&b"one"[..], b"three"] {
            let Ok(Some((_, PacketReceived::Complete(len)))) = datagrams.receive(&mut buffer)
            else {
                panic!("expected a datagram");
            };
            assert_eq!(&buffer[..len], expected);
        }
        assert!(matches!(datagrams.receive(&mut buffer), Ok(None)));
        datagrams.send(from, b"out").expect("send");
        let (bytes, out) = datagrams.outbound();
        assert_eq!(&bytes[out[0].1.clone()], b"out");
    }
}
