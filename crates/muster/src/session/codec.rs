//! Envelopes to frames. A frame is a WebSocket message: text for JSON, binary for protobuf; the
//! native TCP transport writes a binary frame's bytes behind a length prefix. (Frames in are
//! decoded by each transport, which knows its own message types.)

use muster_proto::realtime::{self, Envelope};

use super::Format;

/// One encoded envelope, as queued on an outbox and written by a transport.
pub type Frame = axum::extract::ws::Message;

/// Encodes an envelope once, in `format`.
pub fn encode(format: Format, envelope: &Envelope) -> Frame {
    match format {
        Format::Json => Frame::Text(realtime::encode_json(envelope).into()),
        Format::Protobuf => Frame::Binary(realtime::encode_protobuf(envelope).into()),
    }
}
