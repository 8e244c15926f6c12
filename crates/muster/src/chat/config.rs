//! The `[chat]` section: every per-socket bound on what a client may do in chat channels.

use serde::{Deserialize, Serialize};

/// Chat channels (`crate::chat`): every per-socket bound on what a client may do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChatConfig {
    /// Channels one socket may be in at once; a join past it is refused.
    pub max_channels_per_socket: usize,
    /// Largest message content, in bytes of JSON text; a larger send or update is refused.
    pub max_content_bytes: usize,
    /// Longest room name, in characters.
    pub max_room_name_chars: usize,
    /// Sends, updates and removes one socket may make per second (token bucket refill rate);
    /// 0 disables the limit.
    pub messages_per_sec: u32,
    /// Bucket size: how many messages a socket may send at once after being quiet.
    pub message_burst: u32,
    /// Most presences listed in the answer to a join (the joiner's view of who is there); the
    /// rest of a very large room still sends presence events.
    pub max_listed_presences: usize,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig {
            max_channels_per_socket: 32,
            max_content_bytes: 2048,
            max_room_name_chars: 64,
            messages_per_sec: 10,
            message_burst: 20,
            max_listed_presences: 1000,
        }
    }
}
