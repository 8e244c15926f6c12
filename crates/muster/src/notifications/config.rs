//! The `[notifications]` section: stored notifications (`crate::notifications`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotificationsConfig {
    /// Most stored notifications one user keeps: storing another deletes their oldest.
    pub max_per_user: usize,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        NotificationsConfig { max_per_user: 1000 }
    }
}

impl NotificationsConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_per_user == 0 {
            return Err("notifications.max_per_user must be at least 1".into());
        }
        Ok(())
    }
}
