//! Envelopes to frames and back. A frame is a WebSocket message: text for JSON, binary for
//! protobuf; the native TCP transport writes a binary frame's bytes behind a length prefix.

use muster_proto::realtime::{self, DecodeError, Envelope};

use super::Format;

/// One encoded envelope, as queued on an outbox and written by a transport.
pub type Frame = axum::extract::ws::Message;

/// Decodes a data frame in the format its frame type says (text: JSON, binary: protobuf);
/// `None` for control frames.
pub fn decode(frame: &Frame) -> Option<Result<Envelope, DecodeError>> {
    match frame {
        Frame::Text(text) => Some(realtime::decode_json(text.as_bytes())),
        Frame::Binary(bytes) => Some(realtime::decode_protobuf(bytes)),
        _ => None,
    }
}

/// Encodes an envelope once, in `format`.
pub fn encode(format: Format, envelope: &Envelope) -> Frame {
    match format {
        Format::Json => Frame::Text(realtime::encode_json(envelope).into()),
        Format::Protobuf => Frame::Binary(realtime::encode_protobuf(envelope).into()),
    }
}
