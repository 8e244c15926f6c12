//! The native TCP transport's framing: a stream of realtime [`Envelope`]s, each preceded by its
//! length.
//!
//! ```text
//! frame  = length body
//! length = the body's size in bytes, as a protobuf base-128 varint (1 to 5 bytes, least
//!          significant 7 bits first, high bit set on every byte but the last)
//! body   = one protobuf-encoded Envelope (Nakama's rtapi.Envelope field numbers)
//! ```
//!
//! This is protobuf's standard "length-delimited" stream format, so game clients need no code of
//! their own for it: C#'s `MessageParser.ParseDelimitedFrom` / `WriteDelimitedTo`, Java's
//! `parseDelimitedFrom` / `writeDelimitedTo`, Go's `protodelim` and `prost`'s
//! `encode_length_delimited` read and write it. A 20-byte match input costs 1 byte of framing.
//!
//! The decoder is sans-I/O: it looks at bytes already read and says how many make the next frame,
//! so the server, swarm and tests share it whatever their sockets are.

use crate::realtime::{self, DecodeError, Envelope};

/// The longest length prefix: a `u32` varint.
pub const MAX_HEADER_LEN: usize = 5;

/// Why a byte stream cannot be framed. Both are fatal to the connection: after a bad length the
/// reader no longer knows where the next frame starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes is longer than the limit of {max}")]
    TooLong { len: u64, max: usize },
    #[error("frame length prefix is not a valid varint")]
    BadLength,
}

/// Where the next frame lies in `buf`: `Ok(None)` while more bytes are needed, else the length of
/// its prefix and of its body. A body longer than `max_len` is an error as soon as the prefix is
/// read, before any of the body arrives.
pub fn next_frame(buf: &[u8], max_len: usize) -> Result<Option<(usize, usize)>, FrameError> {
    let mut len: u64 = 0;
    for (i, byte) in buf.iter().take(MAX_HEADER_LEN).enumerate() {
        len |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            if len > max_len as u64 {
                return Err(FrameError::TooLong { len, max: max_len });
            }
            let header = i + 1;
            let body = len as usize;
            return Ok((buf.len() >= header + body).then_some((header, body)));
        }
    }
    if buf.len() >= MAX_HEADER_LEN {
        return Err(FrameError::BadLength);
    }
    Ok(None)
}

/// Appends the length prefix of a `len`-byte body.
pub fn write_header(len: usize, out: &mut Vec<u8>) {
    let (bytes, used) = header(len);
    out.extend_from_slice(&bytes[..used]);
}

/// The length prefix of a `len`-byte body, without allocating: the first `used` bytes of the
/// array. A body is far below 4 GiB (the server caps frames at `max_message_size_bytes`), so
/// its length is a `u32`.
pub fn header(len: usize) -> ([u8; MAX_HEADER_LEN], usize) {
    let mut bytes = [0u8; MAX_HEADER_LEN];
    let mut value = len as u32;
    for (i, slot) in bytes.iter_mut().enumerate() {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            *slot = byte;
            return (bytes, i + 1);
        }
        *slot = byte | 0x80;
    }
    (bytes, MAX_HEADER_LEN)
}

/// Appends one whole frame carrying `envelope`.
pub fn encode_frame(envelope: &Envelope, out: &mut Vec<u8>) {
    let body = realtime::encode_protobuf(envelope);
    write_header(body.len(), out);
    out.extend_from_slice(&body);
}

/// Decodes the body of a frame found by [`next_frame`]. A body that is not an envelope is a
/// [`DecodeError`] like a bad WebSocket frame: answered with an error envelope, the connection
/// kept.
pub fn decode_body(body: &[u8]) -> Result<Envelope, DecodeError> {
    realtime::decode_protobuf(body)
}

/// Reads every complete frame at the front of `buf`, returning the envelopes (or decode errors)
/// and how many bytes they took; the caller drops those bytes and keeps the rest.
pub fn decode_frames(
    buf: &[u8],
    max_len: usize,
) -> Result<(Vec<Result<Envelope, DecodeError>>, usize), FrameError> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some((header, body)) = next_frame(&buf[at..], max_len)? {
        let start = at + header;
        out.push(decode_body(&buf[start..start + body]));
        at = start + body;
    }
    Ok((out, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::realtime::{Message, Ping};
    use proptest::prelude::*;

    #[test]
    fn round_trips_and_matches_prost_length_delimited() {
        let envelope = Envelope::new("7", Message::Ping(Ping {}));
        let mut ours = Vec::new();
        encode_frame(&envelope, &mut ours);
        let theirs = prost::Message::encode_length_delimited_to_vec(&envelope);
        assert_eq!(ours, theirs, "the standard protobuf delimited format");
        let (frames, used) = decode_frames(&ours, 4096).expect("frames");
        assert_eq!(used, ours.len());
        assert_eq!(frames, vec![Ok(envelope)]);
    }

    #[test]
    fn partial_frames_wait_for_more_bytes() {
        let mut two = Vec::new();
        encode_frame(&Envelope::new("1", Message::Ping(Ping {})), &mut two);
        encode_frame(&Envelope::new("2", Message::Ping(Ping {})), &mut two);
        for cut in 0..two.len() {
            let (frames, used) = decode_frames(&two[..cut], 4096).expect("no error");
            assert!(used <= cut);
            assert!(frames.len() <= 2);
        }
        assert_eq!(next_frame(&[], 10), Ok(None));
        assert_eq!(next_frame(&[0x80], 1000), Ok(None), "prefix continues");
    }

    #[test]
    fn long_and_bad_lengths_are_errors() {
        let mut header = Vec::new();
        write_header(300, &mut header);
        assert_eq!(header, vec![0xac, 0x02]);
        assert_eq!(
            next_frame(&header, 299),
            Err(FrameError::TooLong { len: 300, max: 299 })
        );
        assert_eq!(
            next_frame(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], usize::MAX),
            Err(FrameError::BadLength)
        );
        // An empty body is a frame; it is not an envelope with a message.
        let (frames, used) = decode_frames(&[0x00], 10).expect("frame");
        assert_eq!(used, 1);
        assert!(frames[0].is_err());
    }

    proptest! {
        #[test]
        fn decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_frames(&bytes, 128);
        }
    }
}
