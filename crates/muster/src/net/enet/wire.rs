//! Just enough of ENet's datagram header to route and police a datagram before an ENet host
//! reads it: which peer it is for, or whether it opens a connection.
//!
//! An ENet 1.3 datagram starts with a big-endian `u16`: the receiving peer's id (12 bits), the
//! session (2 bits) and two flags (sent-time present, compressed). A connection attempt is
//! addressed to peer id 4095 and its first command is `CONNECT` (command number 2 in the low
//! nibble of the command byte, after the 2- or 4-byte header).
//!
//! [`announced_packet_size`] also reads the fragments a datagram carries: each announces the
//! total size of the packet it is part of, so a packet too big to reassemble is seen at its
//! first fragment (ENet itself drops such fragments without acknowledging them, which would
//! leave the sender retransmitting on a stalled channel until it timed out).

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

/// The largest packet size announced by a fragment in `datagram` (0 when it carries none, or
/// when its commands cannot be read: ENet then judges it).
///
/// ENet 1.3's commands, after the 2- or 4-byte datagram header, each start with a 4-byte
/// header (command number in the low nibble); their fixed sizes come from ENet's `protocol.h`.
/// A `SEND_FRAGMENT` (8) or `SEND_UNRELIABLE_FRAGMENT` (12) holds start sequence (2), data
/// length (2), fragment count (4), fragment number (4), total length (4), offset (4), then its
/// data.
pub fn announced_packet_size(datagram: &[u8]) -> u32 {
    let Some(&[high, low]) = datagram.get(..2) else {
        return 0;
    };
    let header = u16::from_be_bytes([high, low]);
    let mut at = if header & FLAG_SENT_TIME != 0 { 4 } else { 2 };
    let mut largest = 0;
    while at < datagram.len() {
        let command = datagram[at] & COMMAND_MASK;
        let u16_at = |offset: usize| {
            datagram
                .get(at + offset..at + offset + 2)
                .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        };
        let size = match command {
            1 | 4 => Some(8),                  // acknowledge, disconnect
            2 => Some(48),                     // connect
            3 => Some(44),                     // verify connect
            5 => Some(4),                      // ping
            6 => u16_at(4).map(|n| 6 + n),     // send reliable
            7 | 9 => u16_at(6).map(|n| 8 + n), // send unreliable, unsequenced
            10 => Some(12),                    // bandwidth limit
            11 => Some(16),                    // throttle configure
            8 | 12 => {
                let total = datagram
                    .get(at + 16..at + 20)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                if let Some(total) = total {
                    largest = largest.max(total);
                }
                u16_at(6).map(|n| 24 + n)
            }
            _ => None,
        };
        match size {
            Some(size) => at += size,
            None => break,
        }
    }
    largest
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

    /// A fragment command of `total` bytes in all, carrying `data` bytes.
    fn fragment(reliable: bool, total: u32, data: u16) -> Vec<u8> {
        let mut command = vec![if reliable { 0x88 } else { 0x0C }, 0, 0, 1];
        command.extend_from_slice(&7u16.to_be_bytes()); // start sequence
        command.extend_from_slice(&data.to_be_bytes());
        command.extend_from_slice(&3u32.to_be_bytes()); // fragment count
        command.extend_from_slice(&0u32.to_be_bytes()); // fragment number
        command.extend_from_slice(&total.to_be_bytes());
        command.extend_from_slice(&0u32.to_be_bytes()); // offset
        command.extend(std::iter::repeat_n(0xAB, usize::from(data)));
        command
    }

    #[test]
    fn fragments_announce_their_packets_size() {
        // Peer 7 with the sent time; an acknowledge, a ping, then a fragment of a 9,000-byte
        // packet.
        let mut datagram = vec![0x80, 0x07, 0x12, 0x34];
        datagram.extend_from_slice(&[0x01, 0, 0, 2, 0, 1, 0x12, 0x34]);
        datagram.extend_from_slice(&[0x85, 0xFF, 0, 3]);
        datagram.extend(fragment(true, 9_000, 100));
        assert_eq!(announced_packet_size(&datagram), 9_000);
        // Two fragments: the larger total counts; unreliable fragments too.
        let mut two = vec![0x00, 0x07];
        two.extend(fragment(false, 500, 10));
        two.extend(fragment(true, 70_000, 10));
        assert_eq!(announced_packet_size(&two), 70_000);
        // Whole packets and unreadable commands announce nothing.
        let mut whole = vec![0x00, 0x07, 0x86, 0, 0, 4];
        whole.extend_from_slice(&3u16.to_be_bytes());
        whole.extend_from_slice(b"abc");
        assert_eq!(announced_packet_size(&whole), 0);
        assert_eq!(announced_packet_size(&[0x00, 0x07, 0x0F, 0, 0, 0]), 0);
        assert_eq!(announced_packet_size(&[0x00]), 0);
        // A fragment cut short still says its total, if that much arrived.
        let cut = [vec![0x00, 0x07], fragment(true, 123_456, 50)[..20].to_vec()].concat();
        assert_eq!(announced_packet_size(&cut), 123_456);
    }
}
