//! The one node-to-node protocol. Every message a node sends another — a chat message for a
//! channel's members there, a presence change, a match's input, a party's request, a world
//! shard's view, a ban — is a typed [`Message`] of its slice (declared in the slice's `bus.rs`),
//! sent in one envelope and one encoding:
//!
//! - the envelope is `[version, kind, body]`: [`VERSION`] (a node refuses a message of another
//!   version rather than guess at it), the message's [`Message::KIND`] (`<slice>.<message>`,
//!   unique across the slices), and the message itself;
//! - the encoding is MessagePack with named fields (`rmp-serde`): compact and self-describing,
//!   so the Nakama types that cross nodes keep their serde attributes, and bytes already
//!   encoded once (a realtime envelope fanned out to another node's sessions) travel as they
//!   are (`serde_bytes`).
//!
//! [`crate::cluster::bus::Bus`] sends and receives only such messages.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The protocol's version. Nodes of one cluster speak the same one: a message of another is
/// refused (and counted as unreadable), never read as something else.
pub const VERSION: u8 = 1;

/// A message one node sends others (serde's `Serialize` to send it, `Deserialize` to read it).
pub trait Message {
    /// The message's name on the wire, `<slice>.<message>`: unique across the slices.
    const KIND: &'static str;
}

/// Why bytes from another node are not the message expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("not a message of the cluster's protocol: {0}")]
    Malformed(String),
    #[error("a message of protocol version {0}; this node speaks version {VERSION}")]
    Version(u8),
    #[error("a {found} message where a {expected} was expected")]
    Kind {
        found: String,
        expected: &'static str,
    },
}

/// `message` in the protocol's envelope.
pub fn encode<M: Message + Serialize>(message: &M) -> Vec<u8> {
    // Encoding into a Vec fails only for a type serde cannot write as MessagePack (a map with
    // keys that are not strings or numbers), which no message of a slice has.
    rmp_serde::to_vec_named(&(VERSION, M::KIND, message)).unwrap_or_default()
}

/// The message of kind `M` in `bytes`, or why it is not one.
pub fn decode<M: Message + DeserializeOwned>(bytes: &[u8]) -> Result<M, ProtocolError> {
    decode_borrowed(bytes)
}

/// [`decode`] for a message that borrows from `bytes` (a batch of frames read without copying
/// them: `Bytes::slice_ref` makes each one a part of the received buffer).
pub fn decode_borrowed<'a, M: Message + Deserialize<'a>>(
    bytes: &'a [u8],
) -> Result<M, ProtocolError> {
    let malformed = |e: &dyn std::fmt::Display| ProtocolError::Malformed(e.to_string());
    let mut reader = bytes;
    let fields = rmp::decode::read_array_len(&mut reader).map_err(|e| malformed(&e))?;
    if fields != 3 {
        return Err(ProtocolError::Malformed(format!(
            "an envelope of {fields} fields"
        )));
    }
    let version: u8 = rmp::decode::read_int(&mut reader).map_err(|e| malformed(&e))?;
    if version != VERSION {
        return Err(ProtocolError::Version(version));
    }
    let length = rmp::decode::read_str_len(&mut reader).map_err(|e| malformed(&e))? as usize;
    let kind = reader
        .get(..length)
        .and_then(|kind| std::str::from_utf8(kind).ok())
        .ok_or_else(|| ProtocolError::Malformed("an unreadable kind".into()))?;
    if kind != M::KIND {
        return Err(ProtocolError::Kind {
            found: kind.to_owned(),
            expected: M::KIND,
        });
    }
    let body: &'a [u8] = &reader[length..];
    rmp_serde::from_slice(body).map_err(|e| malformed(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Ping {
        node: String,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        note: Option<String>,
        #[serde(with = "serde_bytes")]
        payload: Vec<u8>,
    }

    impl Message for Ping {
        const KIND: &'static str = "test.ping";
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "op", rename_all = "snake_case")]
    enum Change {
        Up { id: u64 },
        Down { id: u64 },
    }

    impl Message for Change {
        const KIND: &'static str = "test.change";
    }

    #[test]
    fn a_message_comes_back_as_it_was_sent() {
        let ping = Ping {
            node: "a".into(),
            note: None,
            payload: vec![0, 1, 2, 255],
        };
        assert_eq!(decode::<Ping>(&encode(&ping)), Ok(ping));
        let change = Change::Down { id: 7 };
        assert_eq!(decode::<Change>(&encode(&change)), Ok(change));
        assert_eq!(
            decode::<Change>(&encode(&Change::Up { id: 1 })),
            Ok(Change::Up { id: 1 })
        );
    }

    #[test]
    fn another_kind_version_or_garbage_is_refused() {
        let bytes = encode(&Change::Up { id: 1 });
        assert!(matches!(
            decode::<Ping>(&bytes),
            Err(ProtocolError::Kind {
                expected: "test.ping",
                ..
            })
        ));
        let mut other_version = bytes.clone();
        other_version[1] = VERSION + 1;
        assert_eq!(
            decode::<Change>(&other_version),
            Err(ProtocolError::Version(VERSION + 1))
        );
        for garbage in [
            &b""[..],
            b"\x93",
            b"{\"op\":\"up\"}",
            &bytes[..bytes.len() - 1],
        ] {
            assert!(matches!(
                decode::<Change>(garbage),
                Err(ProtocolError::Malformed(_))
            ));
        }
    }
}
