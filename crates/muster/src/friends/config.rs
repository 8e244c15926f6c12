//! The `[friends]` section: friends, invites and blocks (`crate::friends`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FriendsConfig {
    /// Most friends, invites (sent and received) and blocks one user may have together. An add
    /// or block past it is refused (429); an invite to a user at it is skipped.
    pub max_per_user: usize,
    /// Adds (each may send invites and their notifications) one user may make per minute; past
    /// it 429 (0: no limit).
    pub adds_per_user_per_minute: u32,
}

impl Default for FriendsConfig {
    fn default() -> Self {
        FriendsConfig {
            max_per_user: 1000,
            adds_per_user_per_minute: 60,
        }
    }
}

impl FriendsConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_per_user == 0 {
            return Err("friends.max_per_user must be at least 1".into());
        }
        Ok(())
    }
}
