//! A native TCP connection's writing side, shared by its task and by whoever pushes to its
//! session's outbox.
//!
//! A message pushed while nothing waits before it (the outbox empty, the task not writing) is
//! written at once by the pushing thread ([`Consumer::try_write`]): a match's state reaches the
//! kernel from the match's own task, in one `writev`, and the connection's task is not woken.
//! Whatever cannot be written so (the task is writing, the kernel's buffer is full) is queued and
//! the task writes it, as before.
//!
//! Order: the outbox offers a message only while its queue is empty, under its lock, and the
//! task *holds* the link ([`TcpLink::hold`], [`TcpLink::begin_write`]) before it drains the
//! outbox or handles a request, until its writes are done ([`TcpLink::release`]). So a direct write never overtakes a queued
//! message, a batch the task has taken, or a request's answer (a `match_join`'s `match` comes
//! before the match's first messages).

use std::io::{ErrorKind, IoSlice};
use std::os::fd::AsRawFd as _;
use std::time::Duration;

use axum::extract::ws::Message as Frame;
use muster_proto::frame;
use parking_lot::Mutex;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::time::timeout;

use super::super::connection::Ending;
use crate::session::outbox::{Consumer, Direct};

pub struct TcpLink {
    write: OwnedWriteHalf,
    /// How long the task waits for the peer to take what it writes.
    limit: Duration,
    state: Mutex<LinkState>,
}

#[derive(Default)]
struct LinkState {
    /// The task is writing, or has not begun serving (the handshake) or has ended: direct
    /// writes are refused and the message is queued.
    held: bool,
    /// What a direct write left unwritten; the task writes it before anything else.
    rest: Option<Vec<u8>>,
}

impl TcpLink {
    /// A link held until the task first releases it (after the handshake's answer).
    pub fn new(write: OwnedWriteHalf, limit: Duration) -> TcpLink {
        TcpLink {
            write,
            limit,
            state: Mutex::new(LinkState {
                held: true,
                rest: None,
            }),
        }
    }

    /// Stops direct writes until [`TcpLink::release`].
    pub fn hold(&self) {
        self.state.lock().held = true;
    }

    /// Holds the link and returns the buffer of the task's next write, starting with what a
    /// direct write left unwritten (set only while the link was not held, so nothing is added
    /// to it afterwards).
    pub fn begin_write(&self) -> Vec<u8> {
        let mut state = self.state.lock();
        state.held = true;
        state.rest.take().unwrap_or_default()
    }

    /// Lets pushes write directly again. The task calls it once its writes are done; a message
    /// queued meanwhile keeps later ones queued behind it (the outbox offers only while empty).
    pub fn release(&self) {
        self.state.lock().held = false;
    }

    /// Writes all of `bytes` (the task's writes, with the link held), giving up on a peer that
    /// does not take them within the limit.
    pub async fn write_all(&self, mut bytes: &[u8]) -> Result<(), Ending> {
        let write = async {
            while !bytes.is_empty() {
                self.write.writable().await?;
                match self.write.try_write(bytes) {
                    Ok(n) => bytes = &bytes[n..],
                    Err(error) if error.kind() == ErrorKind::WouldBlock => {}
                    Err(error) => return Err(error),
                }
            }
            Ok::<(), std::io::Error>(())
        };
        match timeout(self.limit, write).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(Ending::WriteFailed),
        }
    }

    /// Ends the link: no more direct writes, and the peer is told (FIN) at once, though pushes
    /// may still hold the link until the session is gone.
    pub fn close(&self) {
        self.hold();
        let fd = self.write.as_ref().as_raw_fd();
        let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Write);
    }
}

impl Consumer for TcpLink {
    fn try_write(&self, message: &Frame) -> Direct {
        // A native session is protobuf: every message is binary (anything else is skipped by
        // the task, as it always was).
        let Frame::Binary(body) = message else {
            return Direct::NotNow;
        };
        let mut state = self.state.lock();
        if state.held {
            return Direct::NotNow;
        }
        let (header, used) = frame::header(body.len());
        let total = used + body.len();
        let written = self
            .write
            .try_write_vectored(&[IoSlice::new(&header[..used]), IoSlice::new(body)]);
        match written {
            Ok(n) if n == total => Direct::Written,
            Ok(n) => {
                let mut rest = Vec::with_capacity(total - n);
                if n < used {
                    rest.extend_from_slice(&header[n..used]);
                    rest.extend_from_slice(body);
                } else {
                    rest.extend_from_slice(&body[n - used..]);
                }
                state.held = true;
                state.rest = Some(rest);
                Direct::Begun
            }
            // The kernel's buffer is full, or the connection is broken: the task finds out
            // when it writes what is queued.
            Err(_) => Direct::NotNow,
        }
    }
}
