//! The `[storage]` section: storage objects (`crate::storage`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// Longest value of one object, in bytes (its JSON text).
    pub max_value_bytes: usize,
    /// Most objects one player may own; a write that would create more is refused. The
    /// server's own writes are not bound.
    pub max_objects_per_user: u64,
    /// Most objects one write, read or delete may name.
    pub max_objects_per_request: usize,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            max_value_bytes: 65_536,
            max_objects_per_user: 10_000,
            max_objects_per_request: 100,
        }
    }
}

impl StorageConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_value_bytes < 2 {
            return Err("storage.max_value_bytes must be at least 2 (the value {})".into());
        }
        if self.max_objects_per_user == 0 || self.max_objects_per_request == 0 {
            return Err(
                "storage.max_objects_per_user and storage.max_objects_per_request must be at least 1"
                    .into(),
            );
        }
        Ok(())
    }
}
