//! The `[session]` section: session and refresh tokens (`crate::accounts::tokens`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionConfig {
    /// HMAC key signing session tokens; empty: one generated once and kept in the database.
    pub encryption_key: String,
    /// HMAC key signing refresh tokens; empty: generated and kept like `encryption_key`.
    pub refresh_encryption_key: String,
    /// Lifetime of a session token, in seconds.
    pub token_expiry_sec: u64,
    /// Lifetime of a refresh token, in seconds.
    pub refresh_token_expiry_sec: u64,
    /// A refresh token works once (a refresh answers a new one); false: it works until it
    /// expires or its session is logged out, as in Nakama.
    pub refresh_token_single_use: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            encryption_key: String::new(),
            refresh_encryption_key: String::new(),
            token_expiry_sec: 3600,
            refresh_token_expiry_sec: 7 * 24 * 3600,
            refresh_token_single_use: true,
        }
    }
}
