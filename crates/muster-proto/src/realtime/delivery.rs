//! How an encoded envelope wants to travel on a transport that has both reliable and unreliable
//! channels (ENet): read off the protobuf bytes without decoding the envelope, so a transport
//! that forwards already-encoded frames (a match's state to every player) pays a few byte
//! comparisons per frame, not a decode.
//!
//! Only `match_data` with `reliable = false` is unreliable: everything else a server sends
//! (acks, errors, presences, chat) must arrive, in order.

use prost::encoding::decode_varint;

/// The way a frame should be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Reliable,
    /// Sequenced but not resent: a lost one is superseded by the next.
    Unreliable,
}

/// `Envelope.match_data`'s field number.
const ENVELOPE_MATCH_DATA: u64 = 14;
/// `MatchData.reliable`'s field number.
const MATCH_DATA_RELIABLE: u64 = 5;

/// The delivery a protobuf-encoded [`Envelope`](super::Envelope) asks for. Bytes that do not
/// parse are reliable (they were encoded here; a transport never guesses them away).
pub fn delivery(envelope: &[u8]) -> Delivery {
    match match_data_reliable(envelope) {
        Some(false) => Delivery::Unreliable,
        _ => Delivery::Reliable,
    }
}

/// `Some(reliable)` when the envelope is `match_data`; `None` for any other kind. Follows
/// protobuf's rules as the decoder does: the last oneof field wins, and repeated occurrences of
/// `match_data` merge (the last `reliable` present wins).
fn match_data_reliable(envelope: &[u8]) -> Option<bool> {
    let mut fields = Fields(envelope);
    let mut kind = None;
    while let Some((tag, field)) = fields.next_field()? {
        if tag == ENVELOPE_MATCH_DATA {
            let Field::Bytes(match_data) = field else {
                return None;
            };
            let mut reliable = kind.unwrap_or(false);
            let mut inner = Fields(match_data);
            while let Some((tag, field)) = inner.next_field()? {
                if tag == MATCH_DATA_RELIABLE {
                    if let Field::Varint(value) = field {
                        reliable = value != 0;
                    }
                }
            }
            kind = Some(reliable);
        } else if ENVELOPE_KINDS.contains(&tag) {
            kind = None;
        }
    }
    kind
}

/// The field numbers of `Envelope`'s message oneof.
const ENVELOPE_KINDS: &[u64] = &[
    2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 24, 32, 33,
];

/// A field's value, as far as skipping it needs.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The top-level fields of a protobuf message, in order.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    /// The next field; `Some(None)` at the end, `None` when the bytes do not parse.
    fn next_field(&mut self) -> Option<Option<(u64, Field<'a>)>> {
        if self.0.is_empty() {
            return Some(None);
        }
        let key = decode_varint(&mut self.0).ok()?;
        let field = match key & 7 {
            0 => Field::Varint(decode_varint(&mut self.0).ok()?),
            1 => self.skip(8)?,
            2 => {
                let len = usize::try_from(decode_varint(&mut self.0).ok()?).ok()?;
                let bytes = self.0.get(..len)?;
                self.0 = &self.0[len..];
                Field::Bytes(bytes)
            }
            5 => self.skip(4)?,
            _ => return None,
        };
        Some(Some((key >> 3, field)))
    }

    fn skip(&mut self, len: usize) -> Option<Field<'a>> {
        self.0 = self.0.get(len..)?;
        Some(Field::Fixed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::realtime::{encode_protobuf, Envelope, MatchData, Message, Pong, UserPresence};

    fn match_data(reliable: bool) -> Vec<u8> {
        encode_protobuf(&Envelope::new(
            "7",
            Message::MatchData(MatchData {
                match_id: "m.".into(),
                presence: Some(UserPresence {
                    user_id: "u".into(),
                    ..Default::default()
                }),
                op_code: 3,
                data: vec![1, 2, 3],
                reliable,
            }),
        ))
    }

    #[test]
    fn only_unreliable_match_data_is_unreliable() {
        assert_eq!(delivery(&match_data(false)), Delivery::Unreliable);
        assert_eq!(delivery(&match_data(true)), Delivery::Reliable);
        let pong = encode_protobuf(&Envelope::new("1", Message::Pong(Pong {})));
        assert_eq!(delivery(&pong), Delivery::Reliable);
        let error = encode_protobuf(&Envelope::error("1", 3, "no"));
        assert_eq!(delivery(&error), Delivery::Reliable);
    }

    #[test]
    fn the_last_kind_wins_as_in_the_decoder() {
        let pong = encode_protobuf(&Envelope::new("1", Message::Pong(Pong {})));
        let mut data_then_pong = match_data(false);
        data_then_pong.extend_from_slice(&pong);
        assert_eq!(delivery(&data_then_pong), Delivery::Reliable);
        let mut pong_then_data = pong;
        pong_then_data.extend_from_slice(&match_data(false));
        assert_eq!(delivery(&pong_then_data), Delivery::Unreliable);
        // Two match_data merge: the later `reliable` wins.
        let mut twice = match_data(false);
        twice.extend_from_slice(&match_data(true));
        assert_eq!(delivery(&twice), Delivery::Reliable);
    }

    proptest::proptest! {
        #[test]
        fn agrees_with_the_decoder(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128)) {
            let peeked = delivery(&bytes);
            if let Ok(envelope) = crate::realtime::decode_protobuf(&bytes) {
                let unreliable = matches!(envelope.message, Some(Message::MatchData(ref d)) if !d.reliable);
                proptest::prop_assert_eq!(peeked == Delivery::Unreliable, unreliable);
            }
        }
    }

    #[test]
    fn bytes_that_do_not_parse_are_reliable() {
        let mut cut = match_data(false);
        cut.truncate(cut.len() - 2);
        assert_eq!(delivery(&cut), Delivery::Reliable);
        assert_eq!(delivery(&[0xff; 12]), Delivery::Reliable);
        assert_eq!(delivery(&[]), Delivery::Reliable);
    }
}
