//! Channel and message identifiers.
//!
//! Channel ids are Nakama's (`2...room`, `3.group..`, `4.userA.userB.`); [`Fields`] reads the
//! `room_name` / `group_id` / `user_id_one` / `user_id_two` every message carries straight out of
//! a well-formed id without allocating.
//!
//! Message ids are UUIDs that prove who sent them. An update or remove must come from the
//! message's sender, but a message that is not persisted leaves no record to check that against,
//! and keeping a record of every message in memory would cost more than the channels themselves.
//! So the id carries its own proof: a UUID of version 8 (RFC 9562's custom layout)
//!
//! ```text
//! bits  0..48  creation time, unix ms         (ids sort by time, like UUIDv7)
//! bits 48..52  version 8
//! bits 52..56  flags: bit 0 = persisted
//! bits 56..64  counter, high 8 bits
//! bits 64..66  variant 0b10
//! bits 66..80  counter, low 14 bits          (22-bit per-process counter: unique per ms)
//! bits 80..128 MAC: SipHash-2-4 (secret key) of bits 0..80, the sender's id and the channel id
//! ```
//!
//! Verifying the 48-bit MAC tells whether this sender issued this id in this channel, and gives
//! back the creation time and whether it was persisted, with no lookup at all. Forging one takes
//! ~2^47 guesses, each a rate-limited message. The key is generated once and kept in the
//! database, so every node sharing it accepts every other node's ids.

use std::hash::Hasher as _;
use std::sync::atomic::{AtomicU32, Ordering};

use siphasher::sip128::{Hasher128 as _, SipHasher24};
use uuid::Uuid;

/// The per-message fields derived from a channel id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fields<'a> {
    pub room_name: &'a str,
    pub group_id: &'a str,
    pub user_id_one: &'a str,
    pub user_id_two: &'a str,
}

impl<'a> Fields<'a> {
    /// The fields of a well-formed channel id; all empty for anything else.
    pub fn of(id: &'a str) -> Fields<'a> {
        let mut parts = id.splitn(4, '.');
        let (Some(mode), Some(subject), Some(subcontext), Some(label)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Fields::default();
        };
        match mode {
            "2" => Fields {
                room_name: label,
                ..Fields::default()
            },
            "3" => Fields {
                group_id: subject,
                ..Fields::default()
            },
            "4" => Fields {
                user_id_one: subject,
                user_id_two: subcontext,
                ..Fields::default()
            },
            _ => Fields::default(),
        }
    }
}

/// What a verified message id says about its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issued {
    pub create_time_ms: i64,
    pub persisted: bool,
}

/// Issues and verifies message ids with one secret key.
pub struct MessageIds {
    key: [u8; 16],
    counter: AtomicU32,
}

const COUNTER_BITS: u32 = 22;
const PERSISTED: u8 = 0b0001;

impl MessageIds {
    pub fn new(key: [u8; 16]) -> MessageIds {
        MessageIds {
            key,
            counter: AtomicU32::new(rand::random()),
        }
    }

    /// A key from its hex text (as kept in the database); `None` when it is not 32 hex digits.
    pub fn key_from_hex(text: &str) -> Option<[u8; 16]> {
        let text = text.trim();
        if text.len() != 32 {
            return None;
        }
        let mut key = [0u8; 16];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(key)
    }

    /// A new random key as hex text.
    pub fn random_key_hex() -> String {
        let key: [u8; 16] = rand::random();
        key.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A new id for a message `sender` sends on `channel` at `now_ms`.
    pub fn issue(&self, now_ms: i64, persisted: bool, sender: &Uuid, channel: &str) -> Uuid {
        let count = self.counter.fetch_add(1, Ordering::Relaxed) & ((1 << COUNTER_BITS) - 1);
        let ms = (now_ms.max(0) as u64) & 0xFFFF_FFFF_FFFF;
        let mut bytes = [0u8; 16];
        bytes[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
        bytes[6] = 0x80 | if persisted { PERSISTED } else { 0 };
        bytes[7] = (count >> 14) as u8;
        bytes[8] = 0x80 | ((count >> 8) & 0x3F) as u8;
        bytes[9] = count as u8;
        let mac = self.mac(&bytes[..10], sender, channel);
        bytes[10..].copy_from_slice(&mac);
        Uuid::from_bytes(bytes)
    }

    /// What `id` says, when `sender` issued it on `channel`; `None` for any other id.
    pub fn verify(&self, id: &Uuid, sender: &Uuid, channel: &str) -> Option<Issued> {
        let bytes = id.as_bytes();
        if bytes[6] >> 4 != 8 || bytes[8] >> 6 != 0b10 {
            return None;
        }
        let mac = self.mac(&bytes[..10], sender, channel);
        // Not constant-time: a timing difference on a 48-bit value compared in memory cannot be
        // measured through a rate-limited socket.
        if bytes[10..] != mac {
            return None;
        }
        let mut ms = [0u8; 8];
        ms[2..].copy_from_slice(&bytes[..6]);
        Some(Issued {
            create_time_ms: u64::from_be_bytes(ms) as i64,
            persisted: bytes[6] & PERSISTED != 0,
        })
    }

    fn mac(&self, head: &[u8], sender: &Uuid, channel: &str) -> [u8; 6] {
        let mut hasher = SipHasher24::new_with_key(&self.key);
        hasher.write(head);
        hasher.write(sender.as_bytes());
        hasher.write(channel.as_bytes());
        let full = hasher.finish128().as_bytes();
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&full[..6]);
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_each_channel_kind() {
        assert_eq!(Fields::of("2...lobby.x").room_name, "lobby.x");
        assert_eq!(Fields::of("3.g1..").group_id, "g1");
        let dm = Fields::of("4.a.b.");
        assert_eq!((dm.user_id_one, dm.user_id_two), ("a", "b"));
        assert_eq!(Fields::of("junk"), Fields::default());
    }

    #[test]
    fn ids_verify_only_for_their_sender_and_channel() {
        let ids = MessageIds::new([7; 16]);
        let alice = Uuid::new_v4();
        let bob = Uuid::new_v4();
        let id = ids.issue(1_795_000_000_123, true, &alice, "2...lobby");
        assert_eq!(id.get_version_num(), 8);
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(
            ids.verify(&id, &alice, "2...lobby"),
            Some(Issued {
                create_time_ms: 1_795_000_000_123,
                persisted: true
            })
        );
        assert_eq!(ids.verify(&id, &bob, "2...lobby"), None, "another sender");
        assert_eq!(
            ids.verify(&id, &alice, "2...other"),
            None,
            "another channel"
        );
        assert_eq!(
            MessageIds::new([8; 16]).verify(&id, &alice, "2...lobby"),
            None,
            "another key"
        );
        let mut tampered = *id.as_bytes();
        tampered[6] ^= PERSISTED;
        assert_eq!(
            ids.verify(&Uuid::from_bytes(tampered), &alice, "2...lobby"),
            None,
            "flags are covered by the MAC"
        );
        assert_eq!(ids.verify(&Uuid::new_v4(), &alice, "2...lobby"), None);
        let plain = ids.issue(5, false, &alice, "2...lobby");
        assert_eq!(
            ids.verify(&plain, &alice, "2...lobby").map(|i| i.persisted),
            Some(false)
        );
    }

    #[test]
    fn ids_are_unique_within_a_millisecond() {
        let ids = MessageIds::new([1; 16]);
        let sender = Uuid::new_v4();
        let set: std::collections::HashSet<Uuid> = (0..100_000)
            .map(|_| ids.issue(42, false, &sender, "2...x"))
            .collect();
        assert_eq!(set.len(), 100_000);
    }

    #[test]
    fn keys_round_trip_through_hex() {
        let hex = MessageIds::random_key_hex();
        assert!(MessageIds::key_from_hex(&hex).is_some());
        assert_eq!(MessageIds::key_from_hex("zz"), None);
        assert_eq!(
            MessageIds::key_from_hex("000102030405060708090a0b0c0d0e0f"),
            Some([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])
        );
    }
}
