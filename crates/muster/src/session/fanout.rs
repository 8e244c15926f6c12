//! Delivering one server message to many sockets: encode it at most once per format, then hand
//! every recipient a cheap clone of the encoded frame (a reference-counted buffer, not a copy).
//!
//! Chat fanout, match state broadcasts and presence events all go through here, so the cost of a
//! message is one encode per format plus, per recipient, a refcount increment and a push into
//! its bounded [`Outbox`](super::outbox::Outbox).

use std::sync::OnceLock;

use muster_proto::realtime::Envelope;

use super::codec::{self, Frame};
use super::{Format, Session};

/// An envelope and its encodings, made on first use.
pub struct Encoded {
    envelope: Envelope,
    json: OnceLock<Frame>,
    protobuf: OnceLock<Frame>,
}

impl Encoded {
    pub fn new(envelope: Envelope) -> Encoded {
        Encoded {
            envelope,
            json: OnceLock::new(),
            protobuf: OnceLock::new(),
        }
    }

    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// The frame for a socket of `format`; encoded on the first call for that format.
    pub fn frame(&self, format: Format) -> Frame {
        let cell = match format {
            Format::Json => &self.json,
            Format::Protobuf => &self.protobuf,
        };
        cell.get_or_init(|| codec::encode(format, &self.envelope))
            .clone()
    }

    /// The protobuf encoding (shared with protobuf sockets: encoded once), as sent between nodes.
    pub fn protobuf(&self) -> bytes::Bytes {
        match self.frame(Format::Protobuf) {
            super::codec::Frame::Binary(bytes) => bytes,
            // `codec::encode` makes binary frames for protobuf; this arm is never taken.
            _ => muster_proto::realtime::encode_protobuf(&self.envelope).into(),
        }
    }

    /// Queues the message on `session`'s socket. False when its outbox overflowed: the socket
    /// is then being closed (1008) and the message is not delivered.
    pub fn deliver(&self, session: &Session) -> bool {
        session.outbox.push(self.frame(session.format))
    }

    /// Queues the message on every session given; returns how many took it.
    pub fn deliver_all<'a>(&self, sessions: impl IntoIterator<Item = &'a Session>) -> usize {
        sessions
            .into_iter()
            .filter(|session| self.deliver(session))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use muster_proto::realtime::{Message, Pong};

    #[test]
    fn encodes_once_per_format_and_shares_the_buffer() {
        let encoded = Encoded::new(Envelope::new("", Message::Pong(Pong {})));
        let (Frame::Text(a), Frame::Text(b)) =
            (encoded.frame(Format::Json), encoded.frame(Format::Json))
        else {
            panic!("JSON sockets get text frames")
        };
        assert_eq!(a.as_str(), r#"{"pong":{}}"#);
        assert_eq!(
            a.as_str().as_ptr(),
            b.as_str().as_ptr(),
            "clones share one buffer"
        );
        assert!(matches!(encoded.frame(Format::Protobuf), Frame::Binary(_)));
    }
}
