//! The `[groups]` section: groups and their members (`crate::groups`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupsConfig {
    /// Most groups one user may be in or have asked to join together; a create or join past it
    /// is refused (429), an add past it skips the user.
    pub max_per_user: usize,
    /// A new group's `max_count` when its creator gives none (Nakama's default).
    pub default_max_count: i32,
    /// Group creations one user may make per minute; past it 429 (0: no limit).
    pub creates_per_user_per_minute: u32,
}

impl Default for GroupsConfig {
    fn default() -> Self {
        GroupsConfig {
            max_per_user: 100,
            default_max_count: 100,
            creates_per_user_per_minute: 10,
        }
    }
}

impl GroupsConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_per_user == 0 {
            return Err("groups.max_per_user must be at least 1".into());
        }
        if self.default_max_count < 1 {
            return Err("groups.default_max_count must be at least 1".into());
        }
        Ok(())
    }
}
