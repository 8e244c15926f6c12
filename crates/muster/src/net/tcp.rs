//! The native TCP transport: rooms (and any match) without WebSocket or JSON.
//!
//! A connection carries protobuf realtime envelopes in [`muster_proto::frame`]'s length-delimited
//! frames (a 1–5 byte varint length, then the envelope). The first frame must be
//! `match_join { token }` with a join ticket (from a room's connection info) or a matchmaker
//! token: it authenticates the connection as the ticket's user and joins its match, answered
//! with `match` (same `cid`). After that the connection is a realtime session like a WebSocket
//! in protobuf format: it sends and receives the same envelopes, and sits in the same match as
//! WebSocket players.
//!
//! Bad input: a frame whose body is not an envelope is answered with an `error` envelope and the
//! connection stays open; a length over `socket.max_message_size_bytes` or a malformed length is
//! answered with an `error` (code 3) and the connection is closed (the stream has lost its
//! framing). A first frame that is not a valid join, or a join that fails, is answered with the
//! error and closed; so is one whose join does not arrive within `limits.handshake_timeout_ms`.
//! A joined connection silent for `socket.pong_wait_ms` is closed (send `ping` envelopes when
//! idle); one whose match ends is closed.
//!
//! What others send the session (a match's states, presences) is written at once by the sending
//! task when nothing waits before it ([`super::link`]); the rest is queued on the session's outbox and
//! written by the connection's task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf as _, BytesMut};
use muster_proto::frame::{self, FrameError};
use muster_proto::realtime::{error_code, match_join, DecodeError, Envelope, Message};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{timeout, Instant};
use tokio_util::sync::CancellationToken;

use super::connection::{self, accept_backoff, Ending, Transport};
use super::link::{Framing, Link};
use super::{dispatch, rt_hooks};
use crate::matches::error::MatchError;
use crate::matches::registry::MatchRef;
use crate::matches::JoinTarget;
use crate::net::state::AppState;
use crate::session::outbox::Outbox;
use crate::session::registry::{Admission, Session};
use crate::session::Format;

/// Accepts connections until the server shuts down. Each holds a place under the connection
/// caps ([`super::connections::ConnectionCounter`]) while it lives.
pub async fn serve(listener: TcpListener, state: AppState) {
    let mut failures = 0u32;
    loop {
        let accepted = tokio::select! {
            () = state.shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                failures = 0;
                // Over a cap: closed at once (the refusal is counted by the counter).
                let Ok(held) = state.connections.admit(peer.ip()) else {
                    continue;
                };
                let state = state.clone();
                state.sockets.clone().spawn(async move {
                    connection(stream, peer, state).await;
                    drop(held);
                });
            }
            Err(error) => {
                failures += 1;
                accept_backoff(&error, failures).await;
            }
        }
    }
}

struct Conn {
    buffer: BytesMut,
    max_len: usize,
    link: Arc<Link>,
}

impl Conn {
    /// Writes envelopes as frames, all in one write, holding the link from here on (the
    /// handshake's answers, refusals and last words).
    async fn send(&mut self, envelopes: &[Envelope]) -> Result<(), Ending> {
        let mut out = self.link.begin_write();
        for envelope in envelopes {
            frame::encode_frame(envelope, &mut out);
        }
        self.link.write_all(&mut out).await
    }

    /// Writes what a direct write left, then `replies`, then everything the outbox holds, in
    /// one write; then lets pushes write directly again.
    async fn write_out(&mut self, replies: &[Envelope], outbox: &Outbox) -> Result<(), Ending> {
        let mut out = self.link.begin_write();
        for envelope in replies {
            frame::encode_frame(envelope, &mut out);
        }
        let drained = outbox.drain();
        if let Some(closed) = drained.closed {
            return Err(Ending::of_closed(closed));
        }
        for message in drained.messages {
            Framing::LengthPrefixed.append(&message, &mut out);
        }
        if !out.is_empty() {
            self.link.write_all(&mut out).await?;
        }
        self.link.release();
        Ok(())
    }

    /// Reads more bytes; `Err` at end of stream or on error.
    async fn fill(&mut self) -> Result<(), Ending> {
        if self.buffer.capacity() - self.buffer.len() < 256 {
            self.buffer.reserve(512);
        }
        match self.link.read_buf(&mut self.buffer).await {
            Ok(0) => Err(Ending::ClientClosed),
            Ok(_) => Ok(()),
            Err(error) => {
                tracing::debug!(%error, "TCP read failed");
                Err(Ending::Reset)
            }
        }
    }

    /// Complete frames read so far (decoded, or their decode errors).
    fn frames(&mut self) -> Result<Vec<Result<Envelope, DecodeError>>, FrameError> {
        let (frames, used) = frame::decode_frames(&self.buffer, self.max_len)?;
        self.buffer.advance(used);
        Ok(frames)
    }
}

async fn connection(stream: TcpStream, peer: SocketAddr, state: AppState) {
    let _ = stream.set_nodelay(true);
    let config = &state.services.config.socket;
    let idle = Duration::from_millis(config.pong_wait_ms);
    let mut conn = Conn {
        buffer: BytesMut::with_capacity(256),
        max_len: config.max_message_size_bytes,
        link: Arc::new(Link::new(stream, Framing::LengthPrefixed, idle)),
    };
    let admitted = connection::allow_connect(&state, peer.ip())
        .and_then(|()| connection::take_place(&state, peer.ip()));
    let admission = match admitted {
        Ok(admission) => admission,
        Err(refusal) => {
            let refusal = Envelope::error("", error_code::BAD_INPUT, refusal.message());
            let _ = conn.send(&[refusal]).await;
            return;
        }
    };
    let handshake_limit = Duration::from_millis(state.services.config.limits.handshake_timeout_ms);
    let ending = match timeout(handshake_limit, handshake(&mut conn, admission, &state)).await {
        Ok(Ok((guard, ended))) => {
            let ending = run(&mut conn, &guard.entry, ended, &state, idle).await;
            // The session's cleanup (matches, chat channels, the registry) runs here.
            drop(guard);
            ending
        }
        Ok(Err(ending)) => ending,
        Err(_) => Ending::KeepAliveTimeout,
    };
    connection::record_ending(&state, Transport::Tcp, ending);
    conn.link.close();
}

/// Reads the first frame, which must join a match with a token; registers the session.
async fn handshake(
    conn: &mut Conn,
    admission: Admission,
    state: &AppState,
) -> Result<(crate::session::SessionGuard, Option<CancellationToken>), Ending> {
    let first = loop {
        match conn.frames() {
            Err(error) => {
                let _ = conn
                    .send(&[Envelope::error(
                        "",
                        error_code::BAD_INPUT,
                        error.to_string(),
                    )])
                    .await;
                return Err(Ending::ProtocolError);
            }
            Ok(mut frames) if !frames.is_empty() => break frames.swap_remove(0),
            Ok(_) => conn.fill().await?,
        }
    };
    let refuse = |cid: &str, code: i32, message: &str| Envelope::error(cid, code, message);
    let envelope = match first {
        Ok(envelope) => envelope,
        Err(error) => {
            let _ = conn
                .send(&[refuse(error.cid(), error.code(), &error.to_string())])
                .await;
            return Err(Ending::ProtocolError);
        }
    };
    let cid = envelope.cid.clone();
    let first_join = match envelope.message {
        Some(Message::MatchJoin(join)) => match join.id {
            Some(match_join::Id::Token(token)) => Some((token, join.metadata)),
            _ => None,
        },
        _ => None,
    };
    let Some((token, metadata)) = first_join else {
        let _ = conn
            .send(&[refuse(
                &cid,
                error_code::BAD_INPUT,
                "The first frame must be match_join with a token.",
            )])
            .await;
        return Err(Ending::JoinFailed);
    };
    let matches = &state.services.matches;
    let claims = match matches.tokens.verify(&token) {
        Ok(claims) => claims,
        Err(error) => return Err(refuse_join(conn, state, cid, error).await),
    };
    let outbox = Outbox::with_consumer(
        state.services.config.socket.outgoing_queue_size,
        conn.link.clone(),
    );
    let guard = state.services.registry.register_with_outbox(
        admission,
        claims.uid,
        &claims.usn,
        Format::Protobuf,
        outbox,
    );
    let session = guard.entry.clone();
    match matches
        .join(&session, JoinTarget::Token(token), metadata)
        .await
    {
        Ok(joined) => {
            let reply = Envelope::new(cid, Message::Match(joined));
            conn.send(&[reply]).await?;
            let ended = match matches.registry.get(claims.match_id()) {
                Ok(MatchRef::Authoritative(handle)) => Some(handle.ended.clone()),
                _ => None,
            };
            Ok((guard, ended))
        }
        Err(error) => Err(refuse_join(conn, state, cid, error).await),
    }
}

/// Answers a refused first join with its error (counted as the matches' error) and ends the
/// connection.
async fn refuse_join(conn: &mut Conn, state: &AppState, cid: String, error: MatchError) -> Ending {
    let _ = conn
        .send(&[dispatch::join_refusal(state, cid, error)])
        .await;
    Ending::JoinFailed
}

/// Serves a joined connection until it ends.
///
/// The futures that outlive one message (the shutdown and match-ended signals, the idle timer,
/// the outbox's wake-up) are made once and reused: re-creating them per message showed in
/// profiles as timer-wheel and waker-list churn on every input. The branches are polled in
/// order, reads and the outbox first: a wake-up for either does not poll the cancellations and
/// the timer.
async fn run(
    conn: &mut Conn,
    session: &Arc<Session>,
    ended: Option<CancellationToken>,
    state: &AppState,
    idle: Duration,
) -> Ending {
    // What was queued while the join was answered, then direct writes from here on.
    if let Err(ending) = conn.write_out(&[], &session.outbox).await {
        return ending;
    }
    let ended = ended.unwrap_or_default();
    let shutdown = state.shutdown.cancelled();
    let ended = ended.cancelled();
    let idle_timer = tokio::time::sleep(idle);
    let ready = session.outbox.ready();
    tokio::pin!(shutdown, ended, idle_timer, ready);
    let mut last_heard = Instant::now();
    loop {
        tokio::select! {
            biased;
            filled = conn.fill() => {
                if let Err(ending) = filled {
                    return ending;
                }
                last_heard = Instant::now();
                let frames = match conn.frames() {
                    Ok(frames) => frames,
                    Err(error) => {
                        let _ = conn.send(&[Envelope::error("", error_code::BAD_INPUT, error.to_string())]).await;
                        return Ending::ProtocolError;
                    }
                };
                // Held while the requests are handled: what they cause to be sent (a join's
                // first states) queues behind their answers.
                conn.link.hold();
                let mut replies = Vec::new();
                for decoded in frames {
                    let reply = match decoded {
                        Ok(envelope) => match rt_hooks::handle(envelope, session, state) {
                            dispatch::Handling::Now(reply) => reply,
                            dispatch::Handling::Later(handler) => handler.await,
                        },
                        Err(error) => Some(Envelope::error(error.cid(), error.code(), error.to_string())),
                    };
                    replies.extend(reply);
                }
                if let Err(ending) = conn.write_out(&replies, &session.outbox).await {
                    return ending;
                }
            }
            () = &mut ready => {
                ready.set(session.outbox.ready());
                if let Err(ending) = conn.write_out(&[], &session.outbox).await {
                    return ending;
                }
            }
            () = &mut shutdown => return Ending::ServerShutdown,
            () = &mut ended => return Ending::MatchEnded,
            () = &mut idle_timer => {
                // The timer is moved only when it fires, not on every message.
                let deadline = last_heard + idle;
                if Instant::now() >= deadline {
                    return Ending::KeepAliveTimeout;
                }
                idle_timer.as_mut().reset(deadline);
            }
        }
    }
}
