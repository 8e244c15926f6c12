//! The `[parties]` section: parties (`crate::parties`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PartiesConfig {
    /// Most parties one socket may be in or asking to join together; a create or join past it
    /// is refused.
    pub max_per_session: usize,
}

impl Default for PartiesConfig {
    fn default() -> Self {
        PartiesConfig { max_per_session: 5 }
    }
}

impl PartiesConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_per_session == 0 {
            return Err("parties.max_per_session must be at least 1".into());
        }
        Ok(())
    }
}
