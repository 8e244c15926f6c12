//! One ENet peer as the transport sees it: its limits, its phase (waiting for its join, or a
//! session), and the task that serves its session.
//!
//! The transport's loop owns the ENet hosts; a peer's session runs on a task of its own, like a
//! TCP connection's: it joins the match, then dispatches the envelopes the loop hands it, in
//! order. What the session sends goes through its outbox, which wakes the loop (not the task),
//! so the loop sends every dirty outbox of a tick in one flush.

use std::num::NonZeroU32;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use muster_proto::realtime::{Envelope, Message};
use tokio::sync::mpsc;

use crate::matches::id::MatchId;
use crate::matches::registry::MatchRef;
use crate::matches::JoinTarget;
use crate::net::connection::Ending;
use crate::net::state::AppState;
use crate::net::{dispatch, rt_hooks};
use crate::session::{codec, Admission, Format, Session, SessionGuard};

/// A peer slot's identity: the host, the ENet peer id, and which occupant of that slot (ids are
/// reused after a disconnect, so a late message for an old occupant must not reach a new one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerKey {
    pub host: u16,
    pub peer: u16,
    pub generation: u32,
}

/// What a session's task asks of the loop.
pub enum Command {
    /// Disconnect the peer (after what its outbox holds is sent) and record why.
    Close { key: PeerKey, ending: Ending },
}

/// ENet's disconnect data: why the server closed a peer (documented in docs/matches.md).
pub fn disconnect_code(ending: Ending) -> u32 {
    match ending {
        Ending::ClientClosed | Ending::Reset => 0,
        Ending::ServerShutdown => 1,
        Ending::KeepAliveTimeout => 2,
        Ending::QueueFull => 3,
        Ending::MessageTooBig | Ending::ProtocolError | Ending::WriteFailed => 4,
        Ending::JoinFailed => 5,
        Ending::MatchEnded => 6,
        Ending::Banned => 8,
    }
}

/// Disconnect data for a peer refused before it could join: over the socket limit.
pub const DISCONNECT_FULL: u32 = 7;

/// Where a connected peer is.
pub enum Phase {
    /// Connected; its first packet must be `match_join` with a token before its deadline
    /// (the loop's queue of peers awaiting their join).
    AwaitingJoin { admission: Option<Admission> },
    /// A session: envelopes go to its task.
    Joined {
        session: Arc<Session>,
        inbound: mpsc::Sender<Envelope>,
    },
    /// Being disconnected; nothing more is read or sent.
    Closing,
}

pub struct PeerEntry {
    pub key: PeerKey,
    pub address: std::net::SocketAddr,
    pub phase: Phase,
    /// Why the server is closing it, once it is.
    pub ending: Option<Ending>,
    packets: DefaultDirectRateLimiter,
    bytes: DefaultDirectRateLimiter,
}

impl PeerEntry {
    /// A peer that connected and holds a place under the socket limit, waiting for its join.
    pub fn awaiting_join(
        key: PeerKey,
        address: std::net::SocketAddr,
        admission: Admission,
        packets_per_sec: u32,
        bytes_per_sec: u32,
    ) -> PeerEntry {
        PeerEntry {
            key,
            address,
            phase: Phase::AwaitingJoin {
                admission: Some(admission),
            },
            ending: None,
            packets: per_second(packets_per_sec),
            bytes: per_second(bytes_per_sec),
        }
    }

    /// A peer being disconnected as soon as it connected (`ending` says why).
    pub fn refused(key: PeerKey, address: std::net::SocketAddr, ending: Ending) -> PeerEntry {
        PeerEntry {
            key,
            address,
            phase: Phase::Closing,
            ending: Some(ending),
            packets: per_second(1),
            bytes: per_second(1),
        }
    }

    /// Takes a datagram of `len` bytes from this peer's budgets; false when over either.
    pub fn within_budget(&self, len: usize) -> bool {
        let bytes = NonZeroU32::new(u32::try_from(len.max(1)).unwrap_or(u32::MAX))
            .unwrap_or(NonZeroU32::MIN);
        self.packets.check().is_ok() && matches!(self.bytes.check_n(bytes), Ok(Ok(())))
    }
}

/// `rate` per second, twice that at once.
fn per_second(rate: u32) -> DefaultDirectRateLimiter {
    let rate = NonZeroU32::new(rate).unwrap_or(NonZeroU32::MIN);
    let burst = rate.saturating_mul(NonZeroU32::MIN.saturating_add(1));
    RateLimiter::direct(Quota::per_second(rate).allow_burst(burst))
}

/// Queues `envelope` on `session`'s outbox; false when the outbox overflowed.
pub fn push(session: &Session, envelope: &Envelope) -> bool {
    session
        .outbox
        .push(codec::encode(Format::Protobuf, envelope))
}

/// Serves one peer's session: joins its match with `token` (already verified for `match_id`), then dispatches its envelopes in
/// order until the peer goes (the loop drops `inbound`'s sender), the match ends or the server
/// shuts down. Dropping `guard` at the end runs the session's cleanup.
#[allow(clippy::too_many_arguments)]
pub async fn serve_session(
    guard: SessionGuard,
    cid: String,
    token: String,
    match_id: MatchId,
    metadata: std::collections::HashMap<String, String>,
    mut inbound: mpsc::Receiver<Envelope>,
    state: AppState,
    key: PeerKey,
    commands: mpsc::UnboundedSender<Command>,
) {
    let session = guard.entry.clone();
    let close = |ending: Ending| {
        let _ = commands.send(Command::Close { key, ending });
    };
    let matches = &state.services.matches;
    let room = (state.services.config.socket.outgoing_queue_size / 2).max(1);
    let joined = matches
        .join(&session, JoinTarget::Token(token), metadata)
        .await;
    match joined {
        Ok(joined) => {
            if !push(&session, &Envelope::new(cid, Message::Match(joined))) {
                close(Ending::QueueFull);
                return;
            }
        }
        Err(error) => {
            push(&session, &dispatch::join_refusal(&state, cid, error));
            close(Ending::JoinFailed);
            return;
        }
    }
    let ended = match matches.registry.get(match_id) {
        Ok(MatchRef::Authoritative(handle)) => handle.ended.clone(),
        _ => Default::default(),
    };
    let ending = loop {
        let envelope = tokio::select! {
            () = state.shutdown.cancelled() => break Some(Ending::ServerShutdown),
            () = ended.cancelled() => break Some(Ending::MatchEnded),
            envelope = inbound.recv() => match envelope {
                Some(envelope) => envelope,
                // The peer is gone; the loop recorded why.
                None => break None,
            },
        };
        let reply = match rt_hooks::handle(envelope, &session, &state) {
            dispatch::Handling::Now(reply) => reply,
            dispatch::Handling::Later(handler) => handler.await,
        };
        if let Some(reply) = reply {
            if !push(&session, &reply) {
                break Some(Ending::QueueFull);
            }
            // A burst of requests waits for the loop to send their answers: the outbox's limit
            // is for a client that does not read, not for one that asks many things at once.
            session.outbox.until_below(room).await;
        }
    };
    if let Some(ending) = ending {
        close(ending);
    }
    // The session's cleanup (matches, chat channels, the registry) runs here.
    drop(guard);
}
