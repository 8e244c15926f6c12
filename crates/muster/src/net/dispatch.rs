//! Envelope dispatch: one decoded envelope in, at most one reply out. Each family of message
//! kinds goes to its domain module, which answers the sender through the returned envelope and
//! reaches other sockets through their outboxes ([`fanout`](super::fanout)).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use muster_proto::realtime::{error_code, Envelope, Message, Pong};

use crate::session::Session;
use crate::state::AppState;

/// What answering an envelope takes: a reply known at once, or a handler to await.
// Large only as a return value, matched at once: only the box is held while a handler waits.
#[allow(clippy::large_enum_variant)]
pub enum Handling<'a> {
    Now(Option<Envelope>),
    /// Boxed so a socket's task holds only a pointer while it waits, and each request allocates
    /// only what its own handler needs: an rpc's ~400 bytes, not the ~2 KB a match handler
    /// takes, which every request paid when the whole dispatch was boxed.
    Later(Pin<Box<dyn Future<Output = Option<Envelope>> + Send + 'a>>),
}

/// Answers one envelope from `session`.
pub fn handle<'a>(
    envelope: Envelope,
    session: &'a Arc<Session>,
    state: &'a AppState,
) -> Handling<'a> {
    let Envelope { cid, message } = envelope;
    let Some(message) = message else {
        return Handling::Now(None);
    };
    state
        .metrics
        .realtime_messages
        .with_label_values(&[message.kind()])
        .inc();
    match message {
        Message::Ping(_) => Handling::Now(Some(Envelope::new(cid, Message::Pong(Pong {})))),
        // A client's answer to a ping we never send; nothing to do.
        Message::Pong(_) => Handling::Now(None),

        // Chat channels.
        Message::ChannelJoin(_)
        | Message::ChannelLeave(_)
        | Message::ChannelMessageSend(_)
        | Message::ChannelMessageUpdate(_)
        | Message::ChannelMessageRemove(_) => {
            Handling::Later(Box::pin(crate::chat::handle(cid, message, session, state)))
        }

        // Matches and the matchmaker.
        message @ (Message::MatchCreate(_)
        | Message::MatchJoin(_)
        | Message::MatchLeave(_)
        | Message::MatchDataSend(_)
        | Message::MatchmakerAdd(_)
        | Message::MatchmakerRemove(_)) => {
            Handling::Later(Box::pin(state.matches.handle(session, cid, message)))
        }

        // Server functions.
        Message::Rpc(rpc) => Handling::Later(Box::pin(async move {
            Some(super::rpc_envelope::handle(cid, rpc, session, state).await)
        })),

        // Kinds only the server sends.
        Message::Error(_)
        | Message::Channel(_)
        | Message::ChannelMessage(_)
        | Message::ChannelMessageAck(_)
        | Message::ChannelPresenceEvent(_)
        | Message::Match(_)
        | Message::MatchData(_)
        | Message::MatchPresenceEvent(_)
        | Message::MatchmakerMatched(_)
        | Message::MatchmakerTicket(_) => Handling::Now(Some(Envelope::error(
            cid,
            error_code::UNRECOGNIZED_PAYLOAD,
            format!("'{}' envelopes are sent only by the server", message.kind()),
        ))),
    }
}
