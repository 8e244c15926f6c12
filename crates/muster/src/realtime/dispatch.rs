//! Envelope dispatch: one decoded envelope in, at most one reply out. Each message kind gets a
//! domain handler; this is where later kinds (channels, matches, RPC) plug in.

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
    session: &SessionEntry,
    state: &AppState,
) -> Option<Envelope> {
    let _ = (session, state);
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
        Message::Error(_) => Some(Envelope::error(
            cid,
            error_code::UNRECOGNIZED_PAYLOAD,
            "error envelopes are sent only by the server",
        )),
    }
}
