//! One socket's life: register, read and answer envelopes, write queued messages, keep the peer
//! alive, and close with a reason. A single task does all of it, so an idle socket costs one task,
//! its WebSocket state and a registry entry — no second task, no channel, no spare buffers.
//!
//! tungstenite reads the client's frames; the writing side is the connection's [`Link`]. A
//! message pushed to the session while its task is not writing (a chat message, a match's
//! state) is written by the pushing task at once, the task not woken; the rest is queued on the
//! outbox and written by the task, in order ([`super::link`]).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use muster_proto::realtime::{self, DecodeError, Envelope};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{interval_at, Instant, MissedTickBehavior};
use tokio_tungstenite::WebSocketStream;
use tungstenite::protocol::frame::Frame as WireFrame;
use tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tungstenite::Message;

use super::connection::{self, Ending, Transport};
use super::link::{Framing, Link};
use super::{dispatch, rt_hooks};
use crate::accounts::tokens::Claims;
use crate::net::state::AppState;
use crate::session::codec::{self, Frame};
use crate::session::outbox::Outbox;
use crate::session::{Admission, Format, Session};

/// Why a read failed, as the socket's ending counts it: a peer that vanished (reset, or gone
/// without a close frame) is not a protocol error.
fn classify(error: tungstenite::Error) -> Ending {
    use std::io::ErrorKind;
    use tungstenite::error::ProtocolError;
    tracing::debug!(%error, "WebSocket read failed");
    match error {
        tungstenite::Error::Capacity(_) => Ending::MessageTooBig,
        tungstenite::Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => Ending::Reset,
        tungstenite::Error::Io(ref io)
            if matches!(
                io.kind(),
                ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::BrokenPipe
                    | ErrorKind::UnexpectedEof
            ) =>
        {
            Ending::Reset
        }
        tungstenite::Error::Protocol(_) | tungstenite::Error::Utf8(_) => Ending::ProtocolError,
        _ => Ending::ClientClosed,
    }
}

/// What tungstenite reads from and writes to. Reads come from the connection (through the link,
/// which owns it). What tungstenite
/// writes itself (the pong to a client's ping, the echo of a client's close) is kept here and
/// written by the socket's task through the [`Link`], in order with everything else: tungstenite
/// never writes to the connection, so a direct write can never interleave with one of its.
struct WsIo {
    link: Arc<Link>,
    control: Vec<u8>,
}

impl AsyncRead for WsIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.link.poll_read(cx, buf)
    }
}

impl AsyncWrite for WsIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.control.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

type Socket = WebSocketStream<WsIo>;

/// Takes the frames tungstenite has made itself (a pong, a close's echo), flushed first: it
/// answers a ping when it is next read or flushed.
async fn control_frames(socket: &mut Socket) -> Vec<u8> {
    let _ = socket.flush().await;
    std::mem::take(&mut socket.get_mut().control)
}

/// Writes, in one write: what a direct write left, then what an earlier write given up on left
/// (`out`), then `first` (the answer to the request just handled, a ping, tungstenite's own
/// frames), then everything queued in the outbox; repeats while more was queued meanwhile; then
/// lets pushes write directly again. The answer goes first: a `match_join` is answered with
/// `match` before the match's own first messages (queued while the join was handled, the link
/// held). Answers that must follow a fanout, such as a chat ack after the sender's own
/// `channel_message`, are queued on the outbox by their handler instead.
///
/// A peer that does not take the bytes within the link's limit is dropped; an outbox that
/// overflows meanwhile ends the socket at once (1008), without waiting for the slow write to time
/// out, and what was not written stays in `out` for the close frame to follow.
async fn write_out(
    link: &Link,
    outbox: &Outbox,
    first: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), Ending> {
    let rest = link.begin_write();
    if out.is_empty() {
        *out = rest;
    } else {
        out.extend_from_slice(&rest);
    }
    out.extend_from_slice(first);
    loop {
        let drained = outbox.drain();
        if let Some(closed) = drained.closed {
            return Err(Ending::of_closed(closed));
        }
        for message in &drained.messages {
            Framing::WebSocket.append(message, out);
        }
        if out.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            written = link.write_all(out) => written?,
            closed = outbox.closed() => return Err(Ending::of_closed(closed)),
        }
        // `closed` may have taken the wake-up of a push made during the write.
        if outbox.is_empty() {
            break;
        }
    }
    // An idle socket keeps no write buffer.
    *out = Vec::new();
    link.release();
    Ok(())
}

/// Serves one upgraded socket until it ends. This future lives as long as the socket, so its
/// size is per-socket memory: an `async fn` keeps its arguments in a part of its state that its
/// locals can never reuse, so the upgrade's captures arrive in one box (8 bytes there) and are
/// moved out of it at once. For the same reason the writes (a write with its timeout and the
/// outbox's close signal) are boxed while they run, one allocation per write the task makes,
/// and no envelope is held across an await (see `request`).
// The box is the point: the task waiting for the upgrade captures it, for the socket's life.
#[allow(clippy::boxed_local)]
pub fn serve(
    stream: TcpStream,
    read: Vec<u8>,
    upgrade: Box<Upgrade>,
) -> impl std::future::Future<Output = ()> + Send {
    serve_accepted(Box::new(Accepted {
        stream,
        read,
        upgrade: *upgrade,
    }))
}

/// What an accepted upgrade request carries to its socket, boxed: the task that waits for the
/// upgrade holds it for the socket's whole life, so it holds a pointer, not the few hundred
/// bytes of its fields.
pub struct Upgrade {
    pub claims: Claims,
    /// The socket's wire format.
    pub format: Format,
    /// Whether the socket appears online to its user's followers at once (`status=true`).
    pub appear_online: bool,
    pub admission: Admission,
    pub state: AppState,
}

struct Accepted {
    stream: TcpStream,
    /// Bytes hyper read past the upgrade request: the client's first frames, if it was quick.
    read: Vec<u8>,
    upgrade: Upgrade,
}

async fn serve_accepted(accepted: Box<Accepted>) {
    let Accepted {
        stream,
        read,
        upgrade:
            Upgrade {
                claims,
                format,
                appear_online,
                admission,
                state,
            },
    } = *accepted;
    let _tracked = state.sockets.token();
    let socket_config = &state.services.config.socket;
    let ping_period = Duration::from_millis(socket_config.ping_period_ms);
    let pong_wait = Duration::from_millis(socket_config.pong_wait_ms);
    let link = Arc::new(Link::new(stream, Framing::WebSocket, pong_wait));
    let io = WsIo {
        link: link.clone(),
        control: Vec::new(),
    };
    let config = WebSocketConfig::default()
        .read_buffer_size(socket_config.read_buffer_bytes)
        .max_message_size(Some(socket_config.max_message_size_bytes))
        .max_frame_size(Some(socket_config.max_message_size_bytes));
    let mut socket = Socket::from_partially_read(io, read, Role::Server, Some(config)).await;
    let outbox = Outbox::with_consumer(socket_config.outgoing_queue_size, link.clone());
    let guard = state.services.registry.register_with_outbox(
        admission,
        claims.uid,
        &claims.usn,
        format,
        outbox,
    );
    // Not kept across the socket's life (its strings would be).
    drop(claims);
    let session = &guard.entry;
    if appear_online {
        state.services.status.appear_online(session);
    }
    tracing::debug!(session = %session.session_id, user = %session.user_id, format = ?session.format, "socket opened");
    let mut keepalive = interval_at(Instant::now() + ping_period, ping_period);
    keepalive.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_heard = Instant::now();
    // What a write given up on left unwritten (only when the socket is ending).
    let mut out = Vec::new();

    // Whatever was queued while the socket registered; direct writes from here on.
    let mut ending = Box::pin(write_out(&link, &session.outbox, &[], &mut out))
        .await
        .err();
    while ending.is_none() {
        let step = tokio::select! {
            biased;
            incoming = socket.next() => {
                let message = match incoming {
                    None => Err(Ending::ClientClosed),
                    Some(Err(error)) => Err(classify(error)),
                    Some(Ok(message)) => Ok(message),
                };
                match message {
                    Err(ending) => Err(ending),
                    Ok(message) => {
                        last_heard = Instant::now();
                        Box::pin(answer(message, &mut socket, &link, session, &state, &mut out)).await
                    }
                }
            }
            () = session.outbox.ready() => {
                Box::pin(write_out(&link, &session.outbox, &[], &mut out)).await
            }
            () = state.shutdown.cancelled() => Err(Ending::ServerShutdown),
            _ = keepalive.tick() => {
                if last_heard.elapsed() >= pong_wait {
                    Err(Ending::KeepAliveTimeout)
                } else {
                    let mut ping = Vec::new();
                    let _ = WireFrame::ping(Vec::new()).format(&mut ping);
                    Box::pin(write_out(&link, &session.outbox, &ping, &mut out)).await
                }
            }
        };
        ending = step.err();
    }
    let ending = ending.unwrap_or(Ending::ClientClosed);

    let (session_id, user_id) = (session.session_id, session.user_id);
    // The session's cleanup (chat channels, matches, the registry) runs here, before the close
    // frame is written, so the others hear of the leave without waiting on this peer.
    drop(guard);
    connection::record_ending(&state, Transport::WebSocket, ending);
    if let Some((code, reason)) = ending.close_frame() {
        // A slow consumer's close frame goes after what a write given up on left (`out`); it
        // gets as long as a silent peer does (`socket.pong_wait_ms`) to read that far, so it
        // learns why it was cut off (1008) instead of seeing the connection drop. Other
        // endings are not waiting on the peer: one second.
        let wait = if ending == Ending::QueueFull {
            pong_wait
        } else {
            Duration::from_secs(1)
        };
        let rest = link.begin_write();
        out.extend_from_slice(&rest);
        let close = WireFrame::close(Some(CloseFrame {
            code: code.into(),
            reason: reason.into(),
        }));
        let _ = close.format(&mut out);
        let _ = Box::pin(link.write_all_within(&mut out, wait)).await;
    }
    link.close();
    tracing::debug!(session = %session_id, user = %user_id, reason = ending.label(Transport::WebSocket), "socket closed");
}

/// Handles one message from the client: a request is answered (its answer, then what the
/// outbox holds, in one write), a ping gets tungstenite's pong, a close its echo (and the socket
/// ends).
async fn answer(
    message: Message,
    socket: &mut Socket,
    link: &Link,
    session: &Arc<Session>,
    state: &AppState,
    out: &mut Vec<u8>,
) -> Result<(), Ending> {
    match message {
        Message::Text(_) | Message::Binary(_) => {
            // Held while the request is handled: what it causes to be sent (a join's first
            // states, the sender's own chat message) queues behind its answer.
            link.hold();
            let reply = match request(&message, session, state) {
                Request::Now(reply) => reply,
                Request::Later(handler) => encode_answer(session.format, handler.await),
            };
            drop(message);
            let mut first = Vec::new();
            if let Some(reply) = &reply {
                Framing::WebSocket.append(reply, &mut first);
            }
            // A pong tungstenite owed, if any, goes out with the answer.
            first.append(&mut socket.get_mut().control);
            write_out(link, &session.outbox, &first, out).await
        }
        Message::Close(_) => {
            // tungstenite has made the echo of the client's close (RFC 6455 5.5.1); it goes out
            // after what is queued, so the client sees its close handshake completed.
            let echo = control_frames(socket).await;
            write_out(link, &session.outbox, &echo, out).await?;
            Err(Ending::ClientClosed)
        }
        Message::Ping(_) => {
            let pong = control_frames(socket).await;
            write_out(link, &session.outbox, &pong, out).await
        }
        Message::Pong(_) | Message::Frame(_) => Ok(()),
    }
}

/// What a message from the client asks for.
enum Request<'a> {
    /// The answer, encoded (or none).
    Now(Option<Frame>),
    /// A handler to await for the answer.
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = Option<Envelope>> + Send + 'a>>),
}

/// Decodes a data message (text: JSON, binary: protobuf) and hands its envelope to its handler
/// (a bad message is answered with an error, the socket kept).
fn request<'a>(message: &Message, session: &'a Arc<Session>, state: &'a AppState) -> Request<'a> {
    let format = session.format;
    let decoded = match message {
        Message::Text(text) => realtime::decode_json(text.as_bytes()),
        Message::Binary(bytes) => realtime::decode_protobuf(bytes),
        _ => return Request::Now(None),
    };
    match decoded {
        Ok(envelope) => match rt_hooks::handle(envelope, session, state) {
            dispatch::Handling::Now(reply) => Request::Now(encode_answer(format, reply)),
            dispatch::Handling::Later(handler) => Request::Later(handler),
        },
        Err(error) => Request::Now(encode_answer(format, Some(reject(&error, state)))),
    }
}

fn encode_answer(format: Format, reply: Option<Envelope>) -> Option<Frame> {
    reply.map(|reply| codec::encode(format, &reply))
}

/// The error envelope for a frame that could not be decoded; the socket stays open.
fn reject(error: &DecodeError, state: &AppState) -> Envelope {
    let reason = match error {
        DecodeError::Malformed(_) => "malformed",
        DecodeError::Unrecognized { .. } => "unrecognized",
        DecodeError::Missing { .. } => "missing",
        DecodeError::Ambiguous { .. } => "ambiguous",
    };
    state
        .services
        .metrics
        .realtime_errors
        .with_label_values(&[reason])
        .inc();
    Envelope::error(error.cid(), error.code(), error.to_string())
}
