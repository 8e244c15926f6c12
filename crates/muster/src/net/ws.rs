//! One socket's life: register, read and answer envelopes, write queued messages, keep the peer
//! alive, and close with a reason. A single task does all of it, so an idle socket costs one task,
//! its WebSocket state and a registry entry — no second task, no channel, no spare buffers.

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message as Frame, WebSocket};
use futures_util::SinkExt;
use muster_proto::realtime::{DecodeError, Envelope};
use tokio::time::{interval_at, timeout, Instant, MissedTickBehavior};

use super::connection::{self, Ending, Transport};
use super::dispatch;
use crate::accounts::tokens::Claims;
use crate::net::state::AppState;
use crate::session::codec;
use crate::session::outbox::Outbox;
use crate::session::{Admission, Format, Session};
use std::sync::Arc;

/// Why a read failed, as the socket's ending counts it: a peer that vanished (reset, or gone
/// without a close frame) is not a protocol error.
fn classify(error: axum::Error) -> Ending {
    use std::io::ErrorKind;
    use tungstenite::error::ProtocolError;
    tracing::debug!(%error, "WebSocket read failed");
    let Ok(error) = error.into_inner().downcast::<tungstenite::Error>() else {
        return Ending::ClientClosed;
    };
    match *error {
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

/// Sends one frame, giving up on a peer that does not take it within `limit`.
async fn send(socket: &mut WebSocket, frame: Frame, limit: Duration) -> Result<(), Ending> {
    match timeout(limit, socket.send(frame)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(Ending::WriteFailed),
    }
}

/// Writes `reply` (the direct answer to the request just handled, if any), then everything
/// queued in the outbox, and flushes once, so frames that queued up together leave in as few
/// writes as the write buffer allows. The answer goes first: a `match_join` is answered with
/// `match` before the match's own first messages (queued while the join was handled). Answers
/// that must follow a fanout, such as a chat ack after the sender's own `channel_message`, are
/// queued on the outbox by their handler instead.
///
/// A peer that does not take the frames within `limit` is dropped; an outbox that overflows
/// meanwhile ends the socket at once (1008), without waiting for the slow write to time out.
async fn write_pending(
    socket: &mut WebSocket,
    outbox: &Outbox,
    mut reply: Option<Frame>,
    limit: Duration,
) -> Result<(), Ending> {
    loop {
        let reply = reply.take();
        let write = async {
            let mut reply = reply;
            if let Some(frame) = reply.take() {
                socket.feed(frame).await.map_err(|_| Ending::WriteFailed)?;
            }
            loop {
                let drained = outbox.drain();
                if let Some(closed) = drained.closed {
                    return Err(Ending::of_closed(closed));
                }
                for frame in drained.messages {
                    socket.feed(frame).await.map_err(|_| Ending::WriteFailed)?;
                }
                if outbox.is_empty() {
                    break;
                }
            }
            socket.flush().await.map_err(|_| Ending::WriteFailed)
        };
        tokio::select! {
            biased;
            written = timeout(limit, write) => written.unwrap_or(Err(Ending::WriteFailed))?,
            closed = outbox.closed() => return Err(Ending::of_closed(closed)),
        }
        // `closed` may have taken the wake-up of a push made during the write.
        if outbox.is_empty() {
            return Ok(());
        }
    }
}

/// Serves one upgraded socket until it ends. This future lives as long as the socket, so its
/// size is per-socket memory: an `async fn` keeps its arguments in a part of its state that its
/// locals can never reuse, so the arguments arrive in one box (8 bytes there instead of ~600)
/// and are moved out of it at once. For the same reason the writes (a write with its timeout
/// and the outbox's close signal: ~680 bytes) are boxed while they run, one allocation per
/// write, and no envelope is held across an await (see `request`): the future is 1,016 bytes,
/// from 1,816.
// The box is the point: the closure waiting for the upgrade captures it, for the socket's life.
#[allow(clippy::boxed_local)]
pub fn serve(
    socket: WebSocket,
    upgrade: Box<Upgrade>,
) -> impl std::future::Future<Output = ()> + Send {
    serve_accepted(Box::new(Accepted {
        socket,
        upgrade: *upgrade,
    }))
}

/// What an accepted upgrade request carries to its socket, boxed: the task that waits for the
/// upgrade holds it for the socket's whole life, so it holds a pointer, not ~200 bytes.
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
    socket: WebSocket,
    upgrade: Upgrade,
}

async fn serve_accepted(accepted: Box<Accepted>) {
    let Accepted {
        mut socket,
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
    let config = &state.config.socket;
    let guard = state.registry.register(
        admission,
        claims.uid,
        &claims.usn,
        format,
        config.outgoing_queue_size,
    );
    // Not kept across the socket's life (its strings would be).
    drop(claims);
    let session = &guard.entry;
    if appear_online {
        state.status.appear_online(session);
    }
    tracing::debug!(session = %session.session_id, user = %session.user_id, format = ?session.format, "socket opened");
    let ping_period = Duration::from_millis(config.ping_period_ms);
    let pong_wait = Duration::from_millis(config.pong_wait_ms);
    let mut keepalive = interval_at(Instant::now() + ping_period, ping_period);
    keepalive.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_heard = Instant::now();

    let ending = loop {
        tokio::select! {
            () = state.shutdown.cancelled() => break Ending::ServerShutdown,
            incoming = socket.recv() => {
                let frame = match incoming {
                    None => break Ending::ClientClosed,
                    Some(Err(error)) => break classify(error),
                    Some(Ok(frame)) => frame,
                };
                last_heard = Instant::now();
                if let Frame::Close(_) = frame {
                    // tungstenite has queued the echo of the client's close (RFC 6455 5.5.1);
                    // flushing writes it, so the client sees its close handshake completed.
                    let _ = Box::pin(timeout(pong_wait, socket.flush())).await;
                    break Ending::ClientClosed;
                }
                // Only a frame, or a boxed handler, is held while the answer is awaited: an
                // envelope is 328 bytes that every idle socket would keep room for.
                let reply = match request(&frame, session, &state) {
                    Request::Ignored => continue,
                    Request::Now(reply) => reply,
                    Request::Later(handler) => encode_answer(format, handler.await),
                };
                // The reply goes out first, then whatever the outbox holds, in one flush.
                if let Err(ending) = Box::pin(write_pending(&mut socket, &session.outbox, reply, pong_wait)).await {
                    break ending;
                }
            }
            () = session.outbox.ready() => {
                if let Err(ending) = Box::pin(write_pending(&mut socket, &session.outbox, None, pong_wait)).await {
                    break ending;
                }
            }
            _ = keepalive.tick() => {
                if last_heard.elapsed() >= pong_wait {
                    break Ending::KeepAliveTimeout;
                }
                if let Err(ending) = Box::pin(send(&mut socket, Frame::Ping(Default::default()), pong_wait)).await {
                    break ending;
                }
            }
        }
    };

    let (session_id, user_id) = (session.session_id, session.user_id);
    // The session's cleanup (chat channels, matches, the registry) runs here, before the close
    // frame is written, so the others hear of the leave without waiting on this peer.
    drop(guard);
    connection::record_ending(&state, Transport::WebSocket, ending);
    if let Some((code, reason)) = ending.close_frame() {
        let frame = Frame::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        }));
        // A slow consumer's close frame queues behind what the kernel and the write buffer
        // still hold for it; it gets as long as a silent peer does (`socket.pong_wait_ms`) to
        // read that far, so it learns why it was cut off (1008) instead of seeing the
        // connection drop. Other endings are not waiting on the peer: one second.
        let wait = if ending == Ending::QueueFull {
            pong_wait
        } else {
            Duration::from_secs(1)
        };
        let _ = Box::pin(timeout(wait, socket.send(frame))).await;
    }
    tracing::debug!(session = %session_id, user = %user_id, reason = ending.label(Transport::WebSocket), "socket closed");
}

/// What a frame from the client asks for.
enum Request<'a> {
    /// A control frame, answered by the WebSocket layer itself.
    Ignored,
    /// The answer, encoded (or none).
    Now(Option<Frame>),
    /// A handler to await for the answer.
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = Option<Envelope>> + Send + 'a>>),
}

/// Decodes a frame and hands its envelope to its handler (a bad frame is answered with an
/// error, the socket kept).
fn request<'a>(frame: &Frame, session: &'a Arc<Session>, state: &'a AppState) -> Request<'a> {
    let format = session.format;
    match codec::decode(frame) {
        None => Request::Ignored,
        Some(Ok(envelope)) => match dispatch::handle(envelope, session, state) {
            dispatch::Handling::Now(reply) => Request::Now(encode_answer(format, reply)),
            dispatch::Handling::Later(handler) => Request::Later(handler),
        },
        Some(Err(error)) => Request::Now(encode_answer(format, Some(reject(&error, state)))),
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
        .metrics
        .realtime_errors
        .with_label_values(&[reason])
        .inc();
    Envelope::error(error.cid(), error.code(), error.to_string())
}
