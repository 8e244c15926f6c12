//! The `[friends]` section: friends, invites and blocks (`crate::friends`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FriendsConfig {
    /// Most friends, invites (sent and received) and blocks one user may have together. An add
    /// or block past it is refused (429); an invite to a user at it is skipped.
    pub max_per_user: usize,
}

impl Default for FriendsConfig {
    fn default() -> Self {
        FriendsConfig { max_per_user: 1000 }
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
