//! A connection's writing side, shared by its task and by whoever pushes to its session's outbox:
//! the native TCP transport's and the WebSocket's. The link owns the connection's stream (the
//! task reads through it too: no split halves, no second allocation per socket).
//!
//! A message pushed while nothing waits before it (the outbox empty, the task not writing) is
//! written at once by the pushing thread ([`Consumer::try_write`]): a chat message reaches each
//! member's kernel buffer from the sender's task, a match's state from the match's, in one
//! `writev` each (the frame's header, then the encoded message, shared and not copied), and the
//! connection's task is not woken. Whatever cannot be written so (the task is writing, the
//! kernel's buffer is full) is queued and the task writes it.
//!
//! Order: the outbox offers a message only while its queue is empty, under its lock, and the
//! task *holds* the link ([`Link::hold`], [`Link::begin_write`]) before it drains the outbox or
//! handles a request, until its writes are done ([`Link::release`]). So a direct write never
//! overtakes a queued message, a batch the task has taken, or a request's answer (a
//! `match_join`'s `match` comes before the match's first messages).

use std::io::{Cursor, ErrorKind, IoSlice};
use std::os::fd::AsRawFd as _;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::extract::ws::Message as Frame;
use muster_proto::frame;
use parking_lot::Mutex;
use tokio::io::ReadBuf;
use tokio::net::TcpStream;
use tokio::time::timeout;
use tungstenite::protocol::frame::coding::{Data, OpCode};
use tungstenite::protocol::frame::FrameHeader;

use super::connection::Ending;
use crate::session::outbox::{Consumer, Direct};

/// How messages are framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// The native TCP transport: a varint length, then a protobuf envelope
    /// ([`muster_proto::frame`]). Text messages are not carried.
    LengthPrefixed,
    /// A server's WebSocket frames (RFC 6455: unmasked, one frame per message), their headers
    /// made by tungstenite.
    WebSocket,
}

/// The longest header either framing makes (a WebSocket's with a 64-bit length).
const MAX_HEADER: usize = 14;

impl Framing {
    /// The header that goes before `message`'s bytes (its bytes and length), and the bytes;
    /// `None` for a message this framing does not carry.
    fn frame(self, message: &Frame) -> Option<([u8; MAX_HEADER], usize, &[u8])> {
        let mut header = [0u8; MAX_HEADER];
        match self {
            Framing::LengthPrefixed => {
                let Frame::Binary(body) = message else {
                    return None;
                };
                let (prefix, used) = frame::header(body.len());
                header[..used].copy_from_slice(&prefix[..used]);
                Some((header, used, body))
            }
            Framing::WebSocket => {
                let (data, body): (Data, &[u8]) = match message {
                    Frame::Text(text) => (Data::Text, text.as_bytes()),
                    Frame::Binary(bytes) => (Data::Binary, bytes),
                    _ => return None,
                };
                let head = FrameHeader {
                    opcode: OpCode::Data(data),
                    ..FrameHeader::default()
                };
                let mut cursor = Cursor::new(&mut header[..]);
                head.format(body.len() as u64, &mut cursor)
                    .expect("a header fits in 14 bytes");
                let used = cursor.position() as usize;
                Some((header, used, body))
            }
        }
    }

    /// Appends `message`, framed, to `out` (nothing for a message this framing does not carry).
    pub fn append(self, message: &Frame, out: &mut Vec<u8>) {
        if let Some((header, used, body)) = self.frame(message) {
            out.extend_from_slice(&header[..used]);
            out.extend_from_slice(body);
        }
    }
}

pub struct Link {
    stream: TcpStream,
    framing: Framing,
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

impl Link {
    /// A link held until the task first releases it (after the handshake's answer).
    pub fn new(stream: TcpStream, framing: Framing, limit: Duration) -> Link {
        Link {
            stream,
            framing,
            limit,
            state: Mutex::new(LinkState {
                held: true,
                rest: None,
            }),
        }
    }

    /// Reads what the peer sent into `buf` (the connection's task only; 0 at the end of the
    /// stream).
    pub async fn read_buf(&self, buf: &mut bytes::BytesMut) -> std::io::Result<usize> {
        loop {
            self.stream.readable().await?;
            match self.stream.try_read_buf(buf) {
                Err(error) if error.kind() == ErrorKind::WouldBlock => continue,
                read => return read,
            }
        }
    }

    /// [`Link::read_buf`] as a poll, for a reader that is not async (tungstenite's).
    pub fn poll_read(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            ready!(self.stream.poll_read_ready(cx))?;
            match self.stream.try_read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(error) if error.kind() == ErrorKind::WouldBlock => continue,
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }

    /// Stops direct writes until [`Link::release`].
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
    /// does not take them within the limit. What is written leaves `bytes` as it goes, so a
    /// write given up on (its future dropped) leaves exactly the unwritten rest there, for a
    /// last frame to follow without breaking the stream.
    pub async fn write_all(&self, bytes: &mut Vec<u8>) -> Result<(), Ending> {
        self.write_all_within(bytes, self.limit).await
    }

    /// [`Link::write_all`] with a limit of its own (a close frame's).
    pub async fn write_all_within(
        &self,
        bytes: &mut Vec<u8>,
        limit: Duration,
    ) -> Result<(), Ending> {
        // The common case, a write the kernel takes whole, sets no timer.
        match self.stream.try_write(bytes) {
            Ok(n) if n == bytes.len() => {
                bytes.clear();
                return Ok(());
            }
            Ok(n) => {
                bytes.drain(..n);
            }
            Err(error) if error.kind() == ErrorKind::WouldBlock => {}
            Err(_) => return Err(Ending::WriteFailed),
        }
        let write = async {
            while !bytes.is_empty() {
                self.stream.writable().await?;
                match self.stream.try_write(bytes) {
                    Ok(n) => {
                        bytes.drain(..n);
                    }
                    Err(error) if error.kind() == ErrorKind::WouldBlock => {}
                    Err(error) => return Err(error),
                }
            }
            Ok::<(), std::io::Error>(())
        };
        match timeout(limit, write).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(Ending::WriteFailed),
        }
    }

    /// Ends the link: no more direct writes, and the peer is told (FIN) at once, though pushes
    /// may still hold the link until the session is gone.
    pub fn close(&self) {
        self.hold();
        let fd = self.stream.as_raw_fd();
        let _ = nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Write);
    }
}

impl Consumer for Link {
    fn try_write(&self, message: &Frame) -> Direct {
        // A message the framing does not carry is queued, and skipped by the task (a native
        // session is protobuf: it never gets one).
        let Some((header, used, body)) = self.framing.frame(message) else {
            return Direct::NotNow;
        };
        let mut state = self.state.lock();
        if state.held {
            return Direct::NotNow;
        }
        let total = used + body.len();
        let written = self
            .stream
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The WebSocket framing is tungstenite's own: what it writes, tungstenite's reader takes
    /// back as the same message, for every length class (7-bit, 16-bit and 64-bit lengths).
    #[test]
    fn websocket_frames_read_back_as_the_messages_written() {
        for len in [0usize, 125, 126, 65_535, 65_536] {
            let text = "x".repeat(len);
            let mut out = Vec::new();
            Framing::WebSocket.append(&Frame::Text(text.clone().into()), &mut out);
            Framing::WebSocket.append(&Frame::Binary(vec![7u8; len].into()), &mut out);
            let mut cursor = Cursor::new(&out);
            let (head, length) = FrameHeader::parse(&mut cursor).unwrap().unwrap();
            assert_eq!(
                (head.opcode, head.is_final, head.mask, length),
                (OpCode::Data(Data::Text), true, None, len as u64)
            );
            let start = cursor.position() as usize;
            assert_eq!(&out[start..start + len], text.as_bytes());
            cursor.set_position((start + len) as u64);
            let (head, length) = FrameHeader::parse(&mut cursor).unwrap().unwrap();
            assert_eq!(
                (head.opcode, length),
                (OpCode::Data(Data::Binary), len as u64)
            );
            assert_eq!(cursor.position() as usize + len, out.len());
        }
    }

    #[test]
    fn length_prefixed_frames_carry_binary_only() {
        let mut out = Vec::new();
        Framing::LengthPrefixed.append(&Frame::Text("no".into()), &mut out);
        assert!(out.is_empty());
        Framing::LengthPrefixed.append(&Frame::Binary(vec![1u8; 300].into()), &mut out);
        let (prefix, used) = frame::header(300);
        assert_eq!(&out[..used], &prefix[..used]);
        assert_eq!(&out[used..], &[1u8; 300][..]);
    }
}
