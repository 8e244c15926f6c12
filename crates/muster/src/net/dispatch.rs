//! Envelope dispatch, the same for every transport: one decoded envelope in, at most one reply
//! out. Each family of message kinds goes to its domain, which answers with a
//! [`Answer`] or its own error and reaches other sessions through
//! their outboxes; this module turns both into envelopes, so a domain's error becomes a wire
//! error here and nowhere else.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use muster_proto::realtime::{self, error_code, Envelope, Message, Pong};

use crate::chat::ChatError;
use crate::functions::{CallError, Caller, RpcCode};
use crate::matches::error::MatchError;
use crate::net::state::AppState;
use crate::session::fanout::Encoded;
use crate::session::{Answer, Session};

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

/// The error envelope answering a native connection's refused first join (TCP, ENet), counted
/// as the matches' error.
pub fn join_refusal(state: &AppState, cid: String, error: MatchError) -> Envelope {
    state
        .services
        .matches
        .metrics
        .errors
        .with_label_values(&[error.label()])
        .inc();
    error_envelope(cid, Refusal::Match(error))
}

/// Answers one envelope from `session`, hooks aside (the transports go through
/// [`crate::net::rt_hooks::handle`], which wraps this with a module's realtime hooks).
pub(crate) fn dispatch<'a>(
    envelope: Envelope,
    session: &'a Arc<Session>,
    state: &'a AppState,
) -> Handling<'a> {
    let Envelope { cid, message } = envelope;
    let Some(message) = message else {
        return Handling::Now(None);
    };
    match message {
        Message::Ping(_) => Handling::Now(Some(Envelope::new(cid, Message::Pong(Pong {})))),
        // A client's answer to a ping we never send; nothing to do.
        Message::Pong(_) => Handling::Now(None),

        // Chat channels.
        message @ (Message::ChannelJoin(_)
        | Message::ChannelLeave(_)
        | Message::ChannelMessageSend(_)
        | Message::ChannelMessageUpdate(_)
        | Message::ChannelMessageRemove(_)) => Handling::Later(Box::pin(async move {
            let answered = crate::chat::handle(message, session, &state.services.chat).await;
            finish(cid, answered.map_err(Refusal::Chat), session)
        })),

        // Following users' status.
        message @ (Message::StatusFollow(_)
        | Message::StatusUnfollow(_)
        | Message::StatusUpdate(_)) => Handling::Later(Box::pin(async move {
            let answered = state.services.status.handle(message, session).await;
            finish(cid, answered.map_err(Refusal::Status), session)
        })),

        // Parties.
        message @ (Message::PartyCreate(_)
        | Message::PartyJoin(_)
        | Message::PartyLeave(_)
        | Message::PartyPromote(_)
        | Message::PartyAccept(_)
        | Message::PartyRemove(_)
        | Message::PartyClose(_)
        | Message::PartyJoinRequestList(_)
        | Message::PartyDataSend(_)
        | Message::PartyMatchmakerAdd(_)
        | Message::PartyMatchmakerRemove(_)
        | Message::PartyUpdate(_)) => Handling::Later(Box::pin(async move {
            let answered = state.services.parties.handle(message, session).await;
            finish(cid, answered.map_err(Refusal::Party), session)
        })),

        // Matches and the matchmaker.
        message @ (Message::MatchCreate(_)
        | Message::MatchJoin(_)
        | Message::MatchLeave(_)
        | Message::MatchDataSend(_)
        | Message::MatchmakerAdd(_)
        | Message::MatchmakerRemove(_)) => Handling::Later(Box::pin(async move {
            let answered = state.services.matches.handle(session, message).await;
            finish(cid, answered.map_err(Refusal::Match), session)
        })),

        // Server functions, called as the session's user.
        Message::Rpc(rpc) => Handling::Later(Box::pin(async move {
            let caller = Caller {
                user_id: session.user_id,
                username: session.username.to_string(),
            };
            let request = crate::functions::RequestContext {
                session_id: Some(session.session_id),
                ..Default::default()
            };
            let answered = state
                .rpc
                .call(&rpc.id, Some(&caller), &rpc.payload, Some(&request))
                .await
                .map(|payload| {
                    Answer::Reply(Message::Rpc(realtime::Rpc {
                        id: rpc.id,
                        payload,
                        http_key: String::new(),
                    }))
                });
            finish(cid, answered.map_err(Refusal::Call), session)
        })),

        // The persistent world's areas of interest.
        Message::WorldSubscribe(request) => Handling::Later(Box::pin(async move {
            let answered = match &state.services.world {
                None => Err("the world is not enabled on this server (world.map)".to_string()),
                Some(world) => world
                    .subscribe(session, &request)
                    .await
                    .map(|snapshot| Answer::Reply(Message::WorldState(snapshot))),
            };
            finish(cid, answered.map_err(Refusal::World), session)
        })),
        Message::WorldUnsubscribe(_) => {
            if let Some(world) = &state.services.world {
                world.unsubscribe(session.session_id);
            }
            Handling::Now((!cid.is_empty()).then_some(Envelope { cid, message: None }))
        }

        // Kinds only the server sends.
        Message::WorldState(_)
        | Message::Error(_)
        | Message::Channel(_)
        | Message::ChannelMessage(_)
        | Message::ChannelMessageAck(_)
        | Message::ChannelPresenceEvent(_)
        | Message::Match(_)
        | Message::MatchData(_)
        | Message::MatchPresenceEvent(_)
        | Message::MatchmakerMatched(_)
        | Message::MatchmakerTicket(_)
        | Message::Status(_)
        | Message::StatusPresenceEvent(_)
        | Message::Party(_)
        | Message::PartyLeader(_)
        | Message::PartyJoinRequest(_)
        | Message::PartyMatchmakerTicket(_)
        | Message::PartyData(_)
        | Message::PartyPresenceEvent(_)
        | Message::StreamData(_)
        | Message::StreamPresenceEvent(_)
        | Message::Notifications(_) => Handling::Now(Some(Envelope::error(
            cid,
            error_code::UNRECOGNIZED_PAYLOAD,
            format!("'{}' envelopes are sent only by the server", message.kind()),
        ))),
    }
}

/// A domain's refusal on its way to the wire.
pub enum Refusal {
    Chat(ChatError),
    Match(MatchError),
    Call(CallError),
    /// A world request refused (no world, unknown shard, bad box, busy), with the reason.
    World(String),
    Status(crate::status::StatusError),
    Party(crate::parties::PartiesError),
}

/// Turns a domain's answer into the envelope for the request with correlation id `cid`.
fn finish(cid: String, answered: Result<Answer, Refusal>, session: &Session) -> Option<Envelope> {
    match answered {
        Ok(Answer::Reply(message)) => Some(Envelope::new(cid, message)),
        Ok(Answer::AfterQueued(message)) => {
            // Through the outbox, behind what the request queued there: the socket writes a
            // request's direct reply before what its outbox holds.
            Encoded::new(Envelope::new(cid, message)).deliver(session);
            None
        }
        Ok(Answer::Done) if cid.is_empty() => None,
        Ok(Answer::Done) => Some(Envelope { cid, message: None }),
        Ok(Answer::Silent) => None,
        Err(refusal) => Some(error_envelope(cid, refusal)),
    }
}

/// The error envelope for a refusal, with Nakama's realtime error codes.
pub fn error_envelope(cid: impl Into<String>, refusal: Refusal) -> Envelope {
    let (code, message, context) = match refusal {
        Refusal::Chat(error) => {
            // A failed write is the server's fault; every other refusal is the request's.
            let code = match error {
                ChatError::Storage => error_code::RUNTIME_EXCEPTION,
                _ => error_code::BAD_INPUT,
            };
            let context = HashMap::from([("reason".to_owned(), error.reason().to_owned())]);
            (code, error.to_string(), context)
        }
        Refusal::Match(error) => {
            let code = match error {
                MatchError::NotFound(_) | MatchError::Ended(_) => error_code::MATCH_NOT_FOUND,
                MatchError::Rejected(_) | MatchError::Forbidden(_) | MatchError::TokenSpent(_) => {
                    error_code::MATCH_JOIN_REJECTED
                }
                MatchError::BadInput(_) | MatchError::TooMany(_) => error_code::BAD_INPUT,
            };
            (code, error.to_string(), HashMap::new())
        }
        Refusal::World(why) => (error_code::BAD_INPUT, why, HashMap::new()),
        Refusal::Party(error) => {
            let context = HashMap::from([("reason".to_owned(), error.reason().to_owned())]);
            (error_code::BAD_INPUT, error.to_string(), context)
        }
        Refusal::Status(error) => {
            let code = match error {
                crate::status::StatusError::Store(_) => error_code::RUNTIME_EXCEPTION,
                _ => error_code::BAD_INPUT,
            };
            let context = HashMap::from([("reason".to_owned(), error.reason().to_owned())]);
            (code, error.to_string(), context)
        }
        Refusal::Call(CallError::MissingId) => (
            error_code::BAD_INPUT,
            "RPC ID must be set.".to_owned(),
            HashMap::new(),
        ),
        Refusal::Call(CallError::NotFound) => (
            error_code::RUNTIME_FUNCTION_NOT_FOUND,
            "RPC function not found.".to_owned(),
            HashMap::new(),
        ),
        Refusal::Call(CallError::Failed(error)) => {
            let code = if error.code == RpcCode::InvalidArgument {
                error_code::BAD_INPUT
            } else {
                error_code::RUNTIME_FUNCTION_EXCEPTION
            };
            // The function's own gRPC code, e.g. 9 for an overdraw, for clients that branch on it.
            let context = HashMap::from([("grpc_code".to_owned(), error.code.grpc().to_string())]);
            (code, error.message, context)
        }
    };
    Envelope::new(
        cid,
        Message::Error(realtime::Error {
            code,
            message,
            context,
        }),
    )
}
