//! Just enough of ENet's datagram header to route and police a datagram before an ENet host
//! reads it: which peer it is for, or whether it opens a connection.
//!
//! An ENet 1.3 datagram starts with a big-endian `u16`: the receiving peer's id (12 bits), the
//! session (2 bits) and two flags (sent-time present, compressed). A connection attempt is
//! addressed to peer id 4095 and its first command is `CONNECT` (command number 2 in the low
//! nibble of the command byte, after the 2- or 4-byte header).

/// The id a datagram carries before the server has given the client one.
const NO_PEER: u16 = 4095;
const PEER_ID_MASK: u16 = 0x0FFF;
const FLAG_SENT_TIME: u16 = 0x8000;
const FLAG_COMPRESSED: u16 = 0x4000;
const COMMAND_MASK: u8 = 0x0F;
const COMMAND_CONNECT: u8 = 2;
/// A command header: command, channel, reliable sequence number.
const COMMAND_HEADER_BYTES: usize = 4;

/// What a datagram is, as far as routing it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A connection attempt.
    Connect,
    /// For the peer with this id on the host that holds the sender's address.
    Peer(u16),
    /// Not an ENet datagram this server accepts (too short, compressed — never negotiated
    /// here — or addressed to no peer without connecting).
    Malformed,
}

pub fn classify(datagram: &[u8]) -> Kind {
    let Some(&[high, low]) = datagram.get(..2) else {
        return Kind::Malformed;
    };
    let header = u16::from_be_bytes([high, low]);
    if header & FLAG_COMPRESSED != 0 {
        return Kind::Malformed;
    }
    let peer = header & PEER_ID_MASK;
    if peer != NO_PEER {
        return Kind::Peer(peer);
    }
    let header_bytes = if header & FLAG_SENT_TIME != 0 { 4 } else { 2 };
    match datagram.get(header_bytes..header_bytes + COMMAND_HEADER_BYTES) {
        Some(command) if command[0] & COMMAND_MASK == COMMAND_CONNECT => Kind::Connect,
        _ => Kind::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connects_peers_and_garbage() {
        // A CONNECT as ENet 1.3 sends it: peer 4095 with the sent-time flag, then the command.
        let connect = [0x8F, 0xFF, 0x12, 0x34, 0x82, 0xFF, 0x00, 0x01, 0, 0, 0, 0];
        assert_eq!(classify(&connect), Kind::Connect);
        assert_eq!(classify(&[0x00, 0x07, 0x01, 0x00]), Kind::Peer(7));
        // Session bits and sent time do not change the peer.
        assert_eq!(classify(&[0xB0, 0x07, 0, 0]), Kind::Peer(7));
        assert_eq!(classify(&[0x4F, 0xFF, 0x82, 0, 0, 0]), Kind::Malformed);
        assert_eq!(classify(&[0x0F, 0xFF, 0x86, 0, 0, 1]), Kind::Malformed);
        assert_eq!(classify(&[0x0F, 0xFF, 0x82]), Kind::Malformed);
        assert_eq!(classify(&[0x01]), Kind::Malformed);
        assert_eq!(classify(&[]), Kind::Malformed);
    }
}
