//! The `[status]` section: following users' online status (`crate::status`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatusConfig {
    /// Most users one socket may follow; a follow past it is refused.
    pub max_follows_per_session: usize,
    /// Longest status message, in bytes.
    pub max_status_bytes: usize,
}

impl Default for StatusConfig {
    fn default() -> Self {
        StatusConfig {
            max_follows_per_session: 500,
            max_status_bytes: 2048,
        }
    }
}

impl StatusConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_follows_per_session == 0 {
            return Err("status.max_follows_per_session must be at least 1".into());
        }
        Ok(())
    }
}
