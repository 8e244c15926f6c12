//! Bodies of sign-in, link and unlink with an identity provider (`/v2/account/authenticate/…`,
//! `/link/…`, `/unlink/…`) and of friends' import (`/v2/friend/{facebook,steam}`), as Nakama's
//! `AccountApple`, `AccountGoogle`, `AccountFacebook`, `AccountFacebookInstantGame`,
//! `AccountSteam` and `AccountGameCenter`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// A provider's token (Apple's or Google's ID token, a Facebook access token, a Steam session
/// ticket) and session variables: `AccountApple`, `AccountGoogle`, `AccountFacebook`,
/// `AccountSteam`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AccountToken {
    pub token: String,
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub vars: HashMap<String, String>,
}

/// `AccountFacebookInstantGame`: Facebook Instant Games' signed player info.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AccountFacebookInstantGame {
    #[serde(alias = "signedPlayerInfo")]
    pub signed_player_info: String,
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub vars: HashMap<String, String>,
}

/// `AccountGameCenter`: Game Center's identity verification signature and what it signs.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AccountGameCenter {
    #[serde(alias = "playerId")]
    pub player_id: String,
    #[serde(alias = "bundleId")]
    pub bundle_id: String,
    /// Seconds since the epoch (an int64: a number or, as protojson writes it, a string).
    #[serde(
        alias = "timestampSeconds",
        deserialize_with = "super::leaderboard::int64"
    )]
    pub timestamp_seconds: i64,
    pub salt: String,
    pub signature: String,
    #[serde(alias = "publicKeyUrl")]
    pub public_key_url: String,
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub vars: HashMap<String, String>,
}
