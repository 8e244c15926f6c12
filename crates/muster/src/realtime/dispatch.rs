//! Envelope dispatch: one decoded envelope in, at most one reply out. Each family of message
//! kinds goes to its domain module, which answers the sender through the returned envelope and
//! reaches other sockets through their outboxes ([`fanout`](super::fanout)).

use std::sync::Arc;

use axum::extract::ws::Message as Frame;
use muster_proto::realtime::{self, error_code, DecodeError, Envelope, Message, Pong};

use super::registry::SessionEntry;
use super::Format;
use crate::server::AppState;

/// Decodes a data frame in the format its frame type says (text: JSON, binary: protobuf);
/// `None` for control frames.
pub fn decode(frame: &Frame) -> Option<Result<Envelope, DecodeError>> {
    match frame {
        Frame::Text(text) => Some(realtime::decode_json(text.as_bytes())),
        Frame::Binary(bytes) => Some(realtime::decode_protobuf(bytes)),
        _ => None,
    }
}

/// Encodes an envelope once, in the socket's format.
pub fn encode(format: Format, envelope: &Envelope) -> Frame {
    match format {
        Format::Json => Frame::Text(realtime::encode_json(envelope).into()),
        Format::Protobuf => Frame::Binary(realtime::encode_protobuf(envelope).into()),
    }
}

/// Answers one envelope from `session`.
pub async fn handle(
    envelope: Envelope,
    session: &Arc<SessionEntry>,
    state: &AppState,
) -> Option<Envelope> {
    let cid = envelope.cid;
    let message = envelope.message?;
    state
        .metrics
        .realtime_messages
        .with_label_values(&[message.kind()])
        .inc();
    match message {
        Message::Ping(_) => Some(Envelope::new(cid, Message::Pong(Pong {}))),
        // A client's answer to a ping we never send; nothing to do.
        Message::Pong(_) => None,

        // Chat channels.
        Message::ChannelJoin(_)
        | Message::ChannelLeave(_)
        | Message::ChannelMessageSend(_)
        | Message::ChannelMessageUpdate(_)
        | Message::ChannelMessageRemove(_) => {
            super::channels::handle(cid, message, session, state).await
        }

        // Matches and the matchmaker.
        message @ (Message::MatchCreate(_)
        | Message::MatchJoin(_)
        | Message::MatchLeave(_)
        | Message::MatchDataSend(_)
        | Message::MatchmakerAdd(_)
        | Message::MatchmakerRemove(_)) => state.matches.handle(session, cid, message).await,

        // Server functions.
        Message::Rpc(rpc) => Some(super::rpc::handle(cid, rpc, session, state).await),

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
        | Message::MatchmakerTicket(_) => Some(Envelope::error(
            cid,
            error_code::UNRECOGNIZED_PAYLOAD,
            format!("'{}' envelopes are sent only by the server", message.kind()),
        )),
    }
}
